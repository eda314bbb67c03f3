"""A nine-deployment results directory made from the runs recorded on the H200 (docs/gpu-validation/), for
the evidence page's layout tests: no live run, every number a measured one. Runs that shared a deployment
name are renamed apart; two runs appear twice under a second name, so nine deployments fill the page."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

VALIDATION = Path(__file__).parents[1] / "docs" / "gpu-validation"

# (results directory, run id, deployment name on the page, copy): a copy gets its own run id
RUNS = (
    (
        "h200-run1",
        "20261202T111505Z-gpu-validation-random-740m-llamacpp-cuda-h200",
        "740m-256k-session1",
        False,
    ),
    (
        "h200-run2",
        "20261202T113811Z-gpu-validation-random-740m-llamacpp-cuda-h200",
        "740m-256k-session2",
        False,
    ),
    ("h200-run2", "20261202T113811Z-gpu-validation-random-740m-llamacpp-cuda-h200", "740m-256k-again", True),
    (
        "h200-many-users",
        "20261202T135538Z-h200-many-users-random-740m-llamacpp-cuda",
        "740m-many-users",
        False,
    ),
    (
        "h200-many-users",
        "20261202T135710Z-h200-many-users-random-740m-llamacpp-cuda-ngram",
        "740m-ngram",
        False,
    ),
    ("h200-1m", "20261202T235002Z-h200-1m-random-4l1024-llamacpp-cuda", "4l1024-1m-capacity", False),
    ("h200-1m", "20261203T001732Z-h200-1m-ramp-random-4l1024-llamacpp-cuda", "4l1024-1m-ramp", False),
    ("h200-1m", "20261203T042200Z-h200-1m-rest-random-4l1024-llamacpp-cuda", "4l1024-1m-rest", False),
    ("h200-1m", "20261203T042200Z-h200-1m-rest-random-4l1024-llamacpp-cuda", "4l1024-1m-rest-again", True),
)


def nine_deployments(dest: Path) -> Path:
    """Write the results directory under `dest` and return it."""
    results = dest / "results"
    (results / "runs").mkdir(parents=True)
    table_rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for source, run_id, name, copy in RUNS:
        new_id = f"{run_id}-again" if copy else run_id
        target = results / "runs" / new_id
        shutil.copytree(VALIDATION / source / "runs" / run_id, target)
        manifest = json.loads((target / "manifest.json").read_text())
        manifest["deployment"] = name
        (target / "manifest.json").write_text(json.dumps(manifest, indent=1))
        table = VALIDATION / source / "ramp1m.csv"
        if table.exists():
            with table.open() as handle:
                reader = csv.DictReader(handle)
                header = header or list(reader.fieldnames or [])
                for row in reader:
                    if row["run_id"] == run_id:
                        source_file = row.get("source_file", "").replace(run_id, new_id)
                        table_rows.append(
                            {**row, "run_id": new_id, "deployment": name, "source_file": source_file}
                        )
    if header:
        with (results / "ramp1m.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=header)
            writer.writeheader()
            writer.writerows(table_rows)
    return results


# The README's screenshots (the tables, the first figures, a 2-user timeline with the GPU under it):
#   PYTHONPATH=src python tests/report_fixture.py docs/report-nine-deployments.png docs/report-figures.png \
#       docs/report-timeline.png
if __name__ == "__main__":
    import sys
    import tempfile

    from playwright.sync_api import sync_playwright

    from ctxbench.report.campaign import write_campaign_report

    with tempfile.TemporaryDirectory() as scratch:
        _, html = write_campaign_report(nine_deployments(Path(scratch)))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=shutil.which("chromium"), args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(html.as_uri())
            page.screenshot(path=sys.argv[1])
            if len(sys.argv) > 2:
                page.evaluate("document.getElementById('controls').style.position = 'static'")
                top = page.locator("#figures").bounding_box()
                assert top is not None
                clip: Any = {"x": 0, "y": top["y"], "width": 1400, "height": 1250}  # playwright's FloatRect
                page.screenshot(path=sys.argv[2], full_page=True, clip=clip)
            if len(sys.argv) > 3:
                title = "4l1024-1m-rest: two users, prefill and decode"
                page.locator("#figures .plot", has_text=title).first.screenshot(path=sys.argv[3])
            browser.close()
