"""A check whose folder holds its reporting (`Check.own_report`: returning users first) is read from there
alone: its run-report section, evidence cells, console line and columns come from the `Check`, every other
check's from the report's and the evidence's own tables, and no module outside the folder names its parts."""

from __future__ import annotations

import re
from pathlib import Path

import ctxbench
from ctxbench.checks.catalog import CHECKS
from ctxbench.report.sections import CHECK_SECTIONS, SECTIONS
from ctxbench.results.columns import EVIDENCE_COLUMNS

ROOT = Path(ctxbench.__file__).parent


def test_every_check_has_its_section_from_one_place() -> None:
    own = {c.name for c in CHECKS if c.own_report}
    assert own >= {"returning"}
    assert set(SECTIONS) == {c.name for c in CHECKS} - own  # not both, not neither
    assert list(CHECK_SECTIONS) == [c.name for c in CHECKS]
    for check in CHECKS:
        if check.own_report:
            assert CHECK_SECTIONS[check.name] == check.section
            assert all(column in EVIDENCE_COLUMNS for column in check.columns), check.name


def test_nothing_outside_the_returning_folder_names_its_parts() -> None:
    folder = ROOT / "checks" / "returning"
    parts = re.compile(
        r"checks\.returning\.|from \.returning\.|returning_(cells|section)\b|ReturningFile|RETURNING_COLUMNS"
    )
    named = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in ROOT.rglob("*.py")
        if folder not in path.parents
        for line in path.read_text().splitlines()
        if parts.search(line)
    ]
    assert named == [], named
