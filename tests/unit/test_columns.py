"""The evidence columns are one tuple (results/columns.py) that the table, the page's groups, the repeats and
the glance read; a cell's verdicts are typed fields, set where the cell is made, never read from its text."""

from __future__ import annotations

import json
import string
from pathlib import Path

from ctxbench.checks.catalog import CHECKS
from ctxbench.checks.throughput.cell import open_loop_cell
from ctxbench.render.cell import MISSING, Cell
from ctxbench.report.decide import Reading, _complete, readings
from ctxbench.results.columns import COLUMN_GROUPS, COLUMNS, EVIDENCE_COLUMNS, REPEATED
from ctxbench.results.evidence import Row
from ctxbench.store.run_dir import RunDir


def test_every_column_is_a_row_field_and_the_derived_tables_follow_the_tuple() -> None:
    own = {c.key for check in CHECKS for c in check.columns}  # in `Row.own`
    fields = set(Row.__dataclass_fields__)
    assert not own & fields  # a folder's columns are not Row fields
    assert [c.key for c in EVIDENCE_COLUMNS] == [key for key, _ in COLUMNS] and set(
        dict(COLUMNS)
    ) <= fields | own
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


def test_every_guide_names_only_columns_a_row_has() -> None:
    keys = {c.key for c in EVIDENCE_COLUMNS} | {"text"}
    for column in EVIDENCE_COLUMNS:
        if column.guide is None:
            continue
        for template in (column.guide.answer, column.guide.conditions):
            named = {field for _, field, _, _ in string.Formatter().parse(template) if field}
            assert named <= keys, (column.key, named - keys)
        assert column.guide.unless is None or column.guide.unless in keys


def _served(name: str, tok_s: float, cost: float | None) -> Row:
    return Row(
        deployment=name,
        run_id=name,
        gpus=1 if cost is not None else 0,
        random_weights=False,
        status="validated",
        own={
            "throughput": Cell(f"{tok_s:.0f} output tok/s", "throughput.json", tok_s),
            "throughput_cost": Cell(f"${cost}/M", "throughput.json", cost) if cost is not None else MISSING,
        },
    )


def test_the_cheapest_reading_ranks_by_value_and_the_fastest_stands_in_only_without_a_cost() -> None:
    costed = {g.question: g for g in readings([_served("a", 100, 2.0), _served("b", 300, 1.0)])}
    cheapest = costed["Many users, short prompts: cheapest per output token"]
    assert cheapest.answer == "b: $1.0/M (300 output tok/s)" and cheapest.conditions.endswith("; validated")
    assert "Many users, short prompts: most output tokens/s" not in costed
    cpu = {g.question: g for g in readings([_served("a", 100, None), _served("b", 300, None)])}
    assert cpu["Many users, short prompts: most output tokens/s"].answer == "b: 300 output tok/s"
    assert readings([])[0] == Reading(
        "Complete recall on every sampled check", "none", readings([])[0].conditions
    )
    assert any(g.answer == "not measured" for g in readings([]))
