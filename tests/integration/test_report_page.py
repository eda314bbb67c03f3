"""The evidence page at nine deployments in a real browser (Chromium, headless, driven by Playwright): it fits
1400 px without scrolling sideways, its interactive figures are drawn, sorting and filtering work, no script
fails, and nothing it loads leaves the page."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright
from report_fixture import nine_deployments

from ctxbench.report.campaign import write_campaign_report
from ctxbench.results.evidence import collect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian's chromium is missing (make test installs it where apt-get can)"
    ),
]


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
        # every figure drawn by the inlined plotly.js, each check's in the claims' order: the needle heatmap,
        # the ramp, decode, the 2-user timelines (five runs recorded one), many users, the GPU over each run
        # that sampled it (four)
        plots = page.locator("#figures .plot")
        drawn = [plots.nth(i).locator("text.gtitle").text_content() or "" for i in range(plots.count())]
        assert drawn[:4] == [
            "One-shot retrieval by length and depth (share of trials that found the fact)",
            "TTFT against context (the conversation ramp)",
            "Recall per turn (green: the planted fact was found)",
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
        assert (link.get_attribute("href") or "").endswith("/report.html")
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        browser.close()
    assert not errors, errors
    outside = [url for url in requested if not url.startswith(("file://", "data:"))]
    assert not outside, outside
    assert requested[0] == html.as_uri()


# Run in the page: every run of letters or digits inside a table cell that the browser drew on two lines
# (a word or a number broken: "decod e", "26214 4"); lines may break at spaces, hyphens and slashes.
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll("th, td")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/[A-Za-z0-9]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""

# Per figure: its title, its tick labels, and whether the legend or the title overlaps the plot area, the
# legend the axis title, or anything sticks out of the figure's box (a name cut off at the edge).
FIGURE_BOXES = """() => Array.from(document.querySelectorAll("#figures .plot")).map(plot => {
  const box = el => el ? el.getBoundingClientRect() : null;
  const hit = (p, q) => !!(p && q && p.width > 0 && q.width > 0 && p.left < q.right && p.right > q.left
    && p.top < q.bottom && p.bottom > q.top);
  const outer = plot.getBoundingClientRect();
  const area = box(plot.querySelector("rect.nsewdrag"));
  const legend = box(plot.querySelector("g.legend"));
  const title = box(plot.querySelector("text.gtitle"));
  const ticks = sel => Array.from(plot.querySelectorAll(sel)).map(e => e.textContent);
  const outside = Array.from(plot.querySelectorAll("g.xtick text, g.ytick text, g.legend text, text.gtitle"))
    .filter(e => { const r = e.getBoundingClientRect();
      return r.left < outer.left - 1 || r.right > outer.right + 1 || r.bottom > outer.bottom + 1; })
    .map(e => e.textContent);
  return {title: plot.querySelector("text.gtitle").textContent, top: outer.top, bottom: outer.bottom,
    titleTop: title.top, xticks: ticks("g.xtick text"), yticks: ticks("g.ytick text"), outside,
    legendOnPlot: hit(legend, area), legendOnAxisTitle: hit(legend, box(plot.querySelector("text.xtitle"))),
    titleOnPlot: hit(title, area), legendWidth: legend ? legend.width : 0, areaWidth: area ? area.width : 0};
})"""


def with_an_open_loop(results: Path) -> None:
    """The many-users run with two open-loop rates, one saturated, made from its own closed-loop level (the
    H200 runs predate the open loop; only the layout is under test here)."""
    (path,) = results.glob("runs/*-h200-many-users-random-740m-llamacpp-cuda/throughput.json")
    data = json.loads(path.read_text())
    level = data["levels"]["1"]
    verdict = {"client_behind": False, "behind_threshold_s": 0.05, "lag_growth": 0.0, "offered_per_s": 1.0}
    verdict |= {
        "realised_per_s": 1.0,
        "sustained_per_s": 1.0,
        "lateness_p50_s": 0.001,
        "lateness_p99_s": 0.002,
    }
    data["rates"] = {
        "0.5": {**level, **verdict, "saturated": False},
        "8": {**level, **verdict, "saturated": True, "lag_growth": 0.4},
    }
    path.write_text(json.dumps(data))


def test_the_page_reads_at_800_px(tmp_path: Path) -> None:
    results = nine_deployments(tmp_path)
    with_an_open_loop(results)
    _, html = write_campaign_report(results)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 800, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(html.as_uri())
        assert page.evaluate(BROKEN_WORDS) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= 800  # tables scroll in their box
        figures = page.evaluate(FIGURE_BOXES)
        page.screenshot(path=str(tmp_path / "page-800.png"), full_page=True)
        browser.close()
    assert not errors, errors
    for figure in figures:
        where = figure["title"]
        assert not figure["outside"], (where, figure["outside"])  # no name cut at the figure's edge
        assert not figure["legendOnPlot"] and not figure["legendOnAxisTitle"], where
        assert not figure["titleOnPlot"], where
        assert figure["legendWidth"] <= figure["areaWidth"] + 1, where
    for above, below in zip(figures, figures[1:], strict=False):
        assert below["titleTop"] >= above["bottom"], (above["title"], below["title"])
    by_title = {f["title"]: f for f in figures}
    decode = by_title["Last-turn decode alone against with a second user"]
    names = {"740m-256k-session1", "740m-256k-session2", "740m-256k-again", "4l1024-1m-rest"}
    assert names <= set(decode["xticks"]), decode["xticks"]  # whole names, so none look alike
    for title in ("Many users: output tokens/s", "Many users: TTFT p50"):
        assert all(tick.isdigit() for tick in by_title[title]["xticks"]), by_title[title]["xticks"]
    rates = by_title["Open loop: TTFT p99 against the offered rate (x: saturated)"]
    assert rates["xticks"] == ["0.5", "8"], rates["xticks"]
