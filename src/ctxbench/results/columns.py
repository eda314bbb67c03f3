"""The evidence table's columns, each one `Column`: its key (`Row.cell(key)`), its heading, the claim group
the page draws it in, its line at a glance where it is a figure to read (not a pass or fail), and its
heading in the repeats table where it is compared over runs, and how the decision guide reads it. Each
check declares its own (`Check.columns`, in its folder's cell.py); `EVIDENCE_COLUMNS` puts them in the
table's order, claim group by claim group. The evidence table, the page's tables, the repeats table, the
glance, the decision guide and the summary export all read it."""

from __future__ import annotations

from collections.abc import Sequence

from ..checks.catalog import CHECKS
from ..render.column import CLAIM_3, CLAIMS_1_2, FIDELITY, MANY_USERS, QUALITY, TRAFFIC, Column


def _own(group: str) -> tuple[Column, ...]:
    """The columns of `group` that checks declare in their own folder (`Check.columns`), catalog order."""
    return tuple(c for check in CHECKS for c in check.columns if c.group == group)


EVIDENCE_COLUMNS: tuple[Column, ...] = (
    Column("deployment", "deployment"),
    Column("status", "status"),
    *_own(CLAIMS_1_2),
    *_own(CLAIM_3),
    *_own(MANY_USERS),
    *_own(TRAFFIC),
    *_own(FIDELITY),
    *_own(QUALITY),
)

# (key, heading) of every column, in the table's order.
COLUMNS: Sequence[tuple[str, str]] = tuple((c.key, c.label) for c in EVIDENCE_COLUMNS)


def _groups() -> tuple[tuple[str, tuple[str, ...]], ...]:
    titles = list(dict.fromkeys(c.group for c in EVIDENCE_COLUMNS if c.group is not None))
    return tuple((title, tuple(c.key for c in EVIDENCE_COLUMNS if c.group == title)) for title in titles)


# The columns by claim: the HTML report draws a table per group, so nine deployments fit without scrolling.
COLUMN_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = _groups()

# (key, heading, digits) of each figure compared over repeated runs.
REPEATED: tuple[tuple[str, str, int], ...] = tuple(
    (c.key, *c.repeated) for c in EVIDENCE_COLUMNS if c.repeated is not None
)
