"""The decision guide: readings of the evidence for particular decisions, each with its conditions.

Generated from the evidence rows alone, in the seed's style ("which result we would use for which
decision"). Never an overall best: each reading answers one question, says under which conditions it
holds, and carries the caveats of the rows it names. How each column is read is its `Guide`, beside the
column in `results/columns.py`; the readings come in the columns' order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..render.cell import MISSING, Cell
from ..render.column import Column, Guide
from ..results.columns import EVIDENCE_COLUMNS
from ..results.evidence import Row


@dataclass(frozen=True)
class Reading:
    question: str
    answer: str
    conditions: str


def _complete(cell: Cell) -> bool:
    """A recall count k/n with n > 0 and every one found."""
    return cell.scored is not None and cell.scored[1] > 0 and cell.scored[0] == cell.scored[1]


def _caveat(row: Row) -> str:
    return f"{row.status}" + (f": {'; '.join(row.reasons)}" if row.reasons else "")


def _weighed(guide: Guide, rows: Sequence[Row]) -> list[Row]:
    if guide.among == "every row":
        return list(rows)
    kept = [r for r in rows if r.status != "failed"]
    if guide.among == "complete recall":
        # the ramp's recall columns: complete alone, and with 2 users where that ran
        shared = [r for r in kept if r.cell("recall_shared") == MISSING or _complete(r.cell("recall_shared"))]
        return [r for r in shared if _complete(r.cell("recall_alone"))]
    return kept


def _qualified(guide: Guide, column: Column, rows: Sequence[Row]) -> list[Row]:
    """The rows a reading names: with a value (ranked), complete counts (a list of names) or a cell (a list of
    cells)."""
    cells = [(r, r.cell(column.key)) for r in _weighed(guide, rows)]
    if guide.listed == "names":
        return [r for r, cell in cells if _complete(cell)]
    if guide.listed == "cells":
        return [r for r, cell in cells if cell.source]
    return [r for r, cell in cells if cell.value is not None]


def _texts(row: Row, column: Column) -> dict[str, str]:
    texts = {c.key: row.cell(c.key).text for c in EVIDENCE_COLUMNS if isinstance(row.cell(c.key), Cell)}
    return {**texts, "text": row.cell(column.key).text}


def _read(guide: Guide, column: Column, rows: Sequence[Row]) -> Reading | None:
    named = _qualified(guide, column, rows)
    if not named:
        return Reading(*guide.missing) if guide.missing else None
    if guide.listed == "names":
        return Reading(guide.question, ", ".join(r.deployment for r in named), guide.conditions)
    if guide.listed == "cells":
        cells = "; ".join(f"{r.deployment}: {r.cell(column.key).text}" for r in named)
        return Reading(guide.question, cells, guide.conditions)

    def value(row: Row) -> float:
        return row.cell(column.key).value or 0.0

    best = min(named, key=value) if guide.lower_is_better else max(named, key=value)
    texts = _texts(best, column)
    conditions = guide.conditions.format(**texts) + (f"; {_caveat(best)}" if guide.caveat else "")
    return Reading(guide.question, f"{best.deployment}: {guide.answer.format(**texts)}", conditions)


def readings(rows: Sequence[Row]) -> list[Reading]:
    """One reading per column with a guide, in the columns' order; says so where the evidence cannot
    inform the decision (`Guide.missing`)."""
    out: list[Reading] = []
    given: set[str] = set()
    guided = [(c.guide, c) for c in EVIDENCE_COLUMNS if c.guide is not None]
    for guide, column in guided:  # a fallback needs to know whether what it stands in for was read
        if guide.unless is None and _qualified(guide, column, rows):
            given.add(column.key)
    for guide, column in guided:
        if guide.unless in given:
            continue
        reading = _read(guide, column, rows)
        if reading is not None:
            out.append(reading)
    return out
