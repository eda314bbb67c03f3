"""A run's report as a page (report/run_page.py, issue 57): written beside report.md wherever a run's report
is written, the same text rendered, titled by campaign and run, a model's answer kept as text; the evidence
page links it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_main import run_main

RECORDED = Path(__file__).parents[2] / "docs" / "gpu-validation" / "h200-run1"


def test_ctxbench_report_writes_each_runs_page_and_the_evidence_page_links_it(tmp_path: Path) -> None:
    results = Path(shutil.copytree(RECORDED, tmp_path / "results"))
    (run,) = (results / "runs").iterdir()
    needle = json.loads((run / "needle.json").read_text())
    needle["trials"][0]["answer"] = "<script>alert('x')</script>"
    (run / "needle.json").write_text(json.dumps(needle))
    (run / "report.html").unlink(missing_ok=True)
    done = run_main(["report", "--results", str(results)])
    assert done.exit_code == 0, done.output
    page = (run / "report.html").read_text()
    assert f"<title>gpu-validation: {run.name}</title>" in page
    assert "<h2>At a glance: " in page and "<table>" in page and "<th>check</th>" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page  # a model's answer stays text
    assert "<script" not in page  # nothing to run, nothing fetched
    assert f'href="runs/{run.name}/report.html"' in (results / "report.html").read_text()


def test_the_evidence_page_is_titled_by_its_campaigns_not_its_directory(tmp_path: Path) -> None:
    # Issue 57: the evidence page's title was the results directory's name ("results").
    results = Path(shutil.copytree(RECORDED, tmp_path / "results"))
    assert run_main(["report", "--results", str(results)]).exit_code == 0
    assert "<title>ctxbench evidence: gpu-validation</title>" in (results / "report.html").read_text()
    assert (results / "report.md").read_text().startswith("# ctxbench evidence: gpu-validation\n")
