"""The evidence columns are one tuple (results/columns.py) that the table, the page's groups, the repeats and
the glance read; a cell's verdicts are typed fields, set where the cell is made, never read from its text."""

from __future__ import annotations

import json
from pathlib import Path

from ctxbench.report.decide import _complete
from ctxbench.results.cell import MISSING, Cell
from ctxbench.results.columns import COLUMN_GROUPS, COLUMNS, EVIDENCE_COLUMNS, REPEATED
from ctxbench.results.evidence import Row
from ctxbench.results.load_cells import open_loop_cell
from ctxbench.store import RunDir


def test_every_column_is_a_row_field_and_the_derived_tables_follow_the_tuple() -> None:
    fields = set(Row.__dataclass_fields__)
    assert [c.key for c in EVIDENCE_COLUMNS] == [key for key, _ in COLUMNS] and set(dict(COLUMNS)) <= fields
    grouped = [key for _, keys in COLUMN_GROUPS for key in keys]
    assert grouped == [c.key for c in EVIDENCE_COLUMNS if c.group]  # every grouped column once, in order
    assert [key for key, _, _ in REPEATED] == [c.key for c in EVIDENCE_COLUMNS if c.repeated]


def _rates(tmp_path: Path, behind: bool) -> Cell:
    run = RunDir.create(tmp_path, "r1")
    line = {"saturated": False, "client_behind": behind, "ttft_s": {"p99": 0.5}}
    (run.path / "throughput.json").write_text(json.dumps({"rates": {"2": line}}))
    return open_loop_cell(tmp_path, run)["open_loop"]


def test_a_client_that_fell_behind_is_a_typed_flag_of_the_open_loop_cell(tmp_path: Path) -> None:
    behind = _rates(tmp_path / "a", behind=True)
    assert behind.client_behind and "client behind at 2 req/s" in behind.text
    assert not _rates(tmp_path / "b", behind=False).client_behind


def test_complete_recall_is_read_from_the_counts_not_the_text() -> None:
    assert _complete(Cell("3/3 (to 4096 tokens)", "niah.log", scored=(3, 3)))
    assert not _complete(Cell("2/3", "ramp1m.csv", scored=(2, 3)))
    assert not _complete(Cell("0/0", "ramp1m.csv", scored=(0, 0)))
    assert not _complete(Cell("3/3 looks complete but carries no counts", "niah.log"))
    assert not _complete(MISSING)
