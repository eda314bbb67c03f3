"""The evidence page at nine deployments in a real browser (Chromium, headless, driven by Playwright): it fits
1400 px without scrolling sideways, its interactive figures are drawn, sorting and filtering work, no script
fails, and nothing it loads leaves the page."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright
from report_fixture import nine_deployments

from ctxbench.report.campaign import write_campaign_report
from ctxbench.results.evidence import collect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it where apt-get can)"
)


def column(page: Page, table: int, index: int) -> list[str]:
    """The data-value of one column's visible cells, top to bottom."""
    return page.evaluate(
        """([table, index]) => Array.from(document.querySelectorAll("table.claim")[table].tBodies[0].rows)
            .filter(row => !row.hidden).map(row => row.cells[index].getAttribute("data-value"))""",
        [table, index],
    )


def test_nine_deployments_fit_sort_filter_and_stay_offline(tmp_path: Path) -> None:
    results = nine_deployments(tmp_path)
    _, html = write_campaign_report(results)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(html.as_uri())
        # every figure drawn by the inlined plotly.js: the ramp, the needle heatmap, decode, the 2-user
        # timelines (five runs recorded one), many users, the GPU over each run that sampled it (four)
        plots = page.locator("#figures .plot")
        drawn = [plots.nth(i).locator("text.gtitle").text_content() or "" for i in range(plots.count())]
        assert drawn[:4] == [
            "TTFT against context (the conversation ramp)",
            "Recall per turn (green: the planted fact was found)",
            "One-shot retrieval by length and depth (share of trials that found the fact)",
            "Last-turn decode alone against with a second user",
        ]
        assert sum(title.endswith(": two users, prefill and decode") for title in drawn) == 5
        assert sum(title.startswith("Many users:") for title in drawn) == 2
        gpu = [title.split(":")[0] for title in drawn if title.endswith("GPU over the run (NVIDIA H200)")]
        assert gpu == ["4l1024-1m-capacity", "4l1024-1m-ramp", "4l1024-1m-rest", "4l1024-1m-rest-again"]

        # a GPU panel under the timeline where the ramp was sampled, and none where it was not
        def panels(name: str) -> int:
            plot = plots.nth(drawn.index(f"{name}: two users, prefill and decode"))
            return plot.locator(".yaxislayer-above .y3tick").count()  # the GPU memory axis ticks

        assert panels("4l1024-1m-rest") > 0 and panels("740m-256k-session1") == 0
        # no horizontal overflow: not the page, not any table
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        assert page.evaluate(
            "Array.from(document.querySelectorAll('table')).every(t => t.scrollWidth <= t.clientWidth + 1)"
        )
        titles = page.locator("section#evidence h2").all_inner_texts()
        assert titles[:3] == [
            "Claims 1 and 2: capacity and retrieval in a fresh document",
            "Claim 3: the growing conversation",
            "Many users",
        ]
        # Claim 3's table: sort by last-turn TTFT alone, ascending then descending; runs without one stay last
        ttft = page.locator("table.claim").nth(1).locator("th", has_text="last-turn TTFT alone")
        index = page.locator("table.claim").nth(1).locator("th").all_inner_texts().index(ttft.inner_text())
        ttft.click()
        values = column(page, 1, index)
        measured = [float(v) for v in values if v]
        assert len(measured) == 6 and measured == sorted(measured) and values[6:] == ["", "", ""]
        ttft.click()
        values = column(page, 1, index)
        assert [float(v) for v in values if v] == sorted(measured, reverse=True) and values[6:] == [
            "",
            "",
            "",
        ]
        # filtering keeps the same runs in every table, and says how many
        page.fill("#filter", "1m")
        assert page.inner_text("#shown") == "4 of 9 runs"
        for table in range(len(titles)):
            assert all("1m" in name for name in column(page, table, 0))
        page.select_option("#status", "failed")
        assert page.inner_text("#shown") == "0 of 9 runs"
        # a status says why on hover; a cell links to its file, a deployment to its run report
        first = collect(results)[0]
        badge = page.locator("span.badge").first
        assert badge.get_attribute("title") == "; ".join(first.reasons) and first.reasons
        link = page.locator("table.claim").first.locator("td a").first
        assert (link.get_attribute("href") or "").endswith("/report.md")
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        browser.close()
    assert not errors, errors
    outside = [url for url in requested if not url.startswith(("file://", "data:"))]
    assert not outside, outside
    assert requested[0] == html.as_uri()
