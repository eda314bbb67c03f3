"""What an evidence column is (`Column`) and how the decision guide reads it (`Guide`): below the checks, so a
check's folder can declare its own column; results/columns.py puts them in the table's order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Which rows a reading weighs: those not failed, every row, or (claim 3's speed and the recall list) those
# not failed whose conversation recall was complete, alone and with 2 users where that ran.
Among = Literal["not failed", "every row", "complete recall"]


@dataclass(frozen=True)
class Guide:
    """How the decision guide (report/decide.py) reads a column. Ranked: of the rows it weighs that have a
    value, the lowest (or highest) answers `question` as "deployment: `answer`", under `conditions`, then the
    row's status and reasons. Not ranked: every row it weighs is listed (`listed`: their names, or each with
    its cell), because each run has its own terms. `answer` and `conditions` may name any column's text as
    {key} ({text} is this cell's). `missing` is the reading when no row qualifies (None: no reading);
    `unless` skips this reading where the named column's reading was given (a fallback)."""

    question: str
    conditions: str
    lower_is_better: bool = True
    among: Among = "not failed"
    answer: str = "{text}"
    caveat: bool = True
    listed: Literal["names", "cells"] | None = None
    missing: tuple[str, str, str] | None = None  # (question, answer, conditions)
    unless: str | None = None


@dataclass(frozen=True)
class Column:
    key: str  # the `Row` field that holds its cell
    label: str  # its heading in the evidence table, on the page and in the summary export
    group: str | None = None  # the page's table (a claim) it sits in; None: in the key columns of every one
    glance: str | None = None  # its line at a glance, as a figure measured (no written pass condition)
    repeated: tuple[str, int] | None = None  # (heading, digits) of its median over runs, in the repeats table
    guide: Guide | None = None  # how the decision guide reads it, in the columns' order; None: not read


# The page's tables, one claim each, in the order the page draws them (results/columns.py `COLUMN_GROUPS`).
CLAIMS_1_2 = "Claims 1 and 2: capacity and retrieval in a fresh document"
CLAIM_3 = "Claim 3: the growing conversation"
FIDELITY = "The cache is faithful: the same answer warm, partly cached and under load as cold"
MANY_USERS = "Many users"
TRAFFIC = "Traffic that comes back: a replayed trace, conversations and agent sessions"
QUALITY = "Quality"
