"""Claim 1 in the evidence table, the glance and the status: its column and cell, its glance line, and what
it says of a run (a prompt near the limit refused, or one over it not cleanly refused, fails the run; a
count error within the tolerance is said)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...render.cell import FAIL, NOT_CONCLUDED, PASS, Cell, Glance, clause
from ...render.column import CLAIMS_1_2, Column
from ...store.run_dir import RunDir
from ..base import Judgement
from .file import CapacityFile

UNIT = "capacity"
CAPACITY_COLUMNS: tuple[Column, ...] = (Column("capacity", "1 capacity", CLAIMS_1_2),)


def capacity_cells(results: Path, run: RunDir) -> dict[str, Cell]:
    capacity = CapacityFile.load(run.path)
    if capacity is None:
        return {}
    source = str(CapacityFile.path_in(run.path).relative_to(results))
    if run.died_during() == UNIT:
        return {
            "capacity": Cell("not concluded: the engine died during it", str(run.path.relative_to(results)))
        }
    if capacity.miscounted:
        # a counting mismatch, named as one: the prompt_not_planned rule fails the row, not the capacity rule
        return {
            "capacity": Cell(f"not concluded: a counting mismatch ({clause(capacity.miscounted)})", source)
        }
    text = (
        f"holds at {capacity.target_tokens} of {capacity.limit_tokens}"
        if capacity.holds
        else f"FAILS: {clause(capacity.near_limit_error or capacity.over_limit_outcome)}"
    )
    return {"capacity": Cell(text, source)}


def glance_lines(run: RunDir, cells: Mapping[str, Cell]) -> list[Glance]:
    cell = cells.get("capacity")
    capacity = CapacityFile.load(run.path)
    if cell is None or capacity is None:
        return []
    if run.died_during() == UNIT:
        return [Glance("1 capacity", NOT_CONCLUDED, cell, "the engine died during the check")]
    return [Glance("1 capacity", PASS if capacity.holds else FAIL, cell)]


def judgement_of(run: RunDir) -> Judgement:
    """The capacity claim does not hold: the run fails. Its prompt's count error, within the tolerance, is
    said (docs/metrics.md). A run the engine died in, or whose count missed the plan, says nothing of it
    (the death and the prompt_not_planned rule speak instead)."""
    capacity = CapacityFile.load(run.path)
    if capacity is None or run.died_during() == UNIT or capacity.miscounted:
        return Judgement()
    if not capacity.holds:
        return Judgement(failed=("the capacity claim does not hold",))
    error = capacity.count_error_tokens
    if not error:
        return Judgement()
    return Judgement(
        provisional=(
            f"the capacity prompt's planned length differs from the server's count by {error:+d} tokens "
            "(within the tolerance; docs/metrics.md)",
        )
    )
