"""The reports of the runs recorded on the H200 (docs/gpu-validation/) are rebuilt from their files alone and
must come out exactly as committed: a redesign that changes a figure, a word or a column of any of them
shows here. A change that is meant is committed with its rebuilt reports (refresh_reports.sh beside them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ctxbench.report.campaign import write_campaign_report
from ctxbench.report.run_report import run_report
from ctxbench.store.run_dir import RunDir

VALIDATION = Path(__file__).parents[2] / "docs" / "gpu-validation"
RECORDED = sorted(p for p in VALIDATION.glob("h[0-9]*-*") if (p / "runs").is_dir())
REFRESH = "if the change is meant, run docs/gpu-validation/refresh_reports.sh and commit what it rebuilt"


def test_there_are_recorded_runs_to_rebuild() -> None:
    assert len(RECORDED) >= 4 and all(any(p.glob("runs/*/report.md")) for p in RECORDED)


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda p: p.name)
def test_rebuilt_reports_of_a_recorded_campaign_are_the_committed_ones(
    recorded: Path, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(recorded, tmp_path / recorded.name))  # the report draws figures beside it
    compared = 0
    for committed in sorted(recorded.glob("runs/*/report.md")):
        rebuilt = run_report(RunDir(copy / "runs" / committed.parent.name))
        assert rebuilt == committed.read_text(), f"{committed} changed: {REFRESH}"
        compared += 1
    if (recorded / "report.md").exists():
        markdown, _ = write_campaign_report(copy)
        assert markdown.read_text() == (recorded / "report.md").read_text(), (
            f"{recorded}/report.md: {REFRESH}"
        )
        compared += 1
    assert compared
