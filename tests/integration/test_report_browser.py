"""The evidence report opened in headless Chromium: the table and figures render, offline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ctxbench.report.campaign import write_campaign_report

H200_RUN = Path(__file__).parents[2] / "docs" / "gpu-validation" / "h200-run1"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian's chromium is missing (make test installs it where apt-get can)"
    ),
]


def test_html_report_shows_table_and_figures_in_a_real_browser(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(H200_RUN, results)
    _, html = write_campaign_report(results)
    profile = tmp_path / "profile"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", html.as_uri()],  # type: ignore[list-item]
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 'id="evidence"' in dom.stdout and "random-740m-llamacpp-cuda-h200" in dom.stdout
    # the Plotly figures, the 2-user timeline among them, drawn as SVG (no image is left in the page)
    assert dom.stdout.count('class="plot') >= 4 and "two users, prefill and decode" in dom.stdout
    assert "<img" not in dom.stdout
    shot = tmp_path / "shot.png"
    assert CHROMIUM is not None  # the module skips without it
    subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            "--window-size=1200,900",
            html.as_uri(),
        ],
        capture_output=True,
        timeout=120,
    )
    from matplotlib import image

    pixels = image.imread(str(shot))
    assert pixels.shape[0] >= 800 and pixels.std() > 0.05  # not blank: text, table borders and colours
