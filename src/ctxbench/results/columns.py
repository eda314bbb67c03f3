"""The evidence table's columns, each one `Column`: its key (the `Row` field), its heading, the claim group
the page draws it in, its line at a glance where it is a figure to read (not a pass or fail), and its
heading in the repeats table where it is compared over runs. The evidence table, the page's tables, the
repeats table, the glance and the summary export all read `EVIDENCE_COLUMNS`; a new column is one entry
here (and its `Row` field and cell)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    key: str  # the `Row` field that holds its cell
    label: str  # its heading in the evidence table, on the page and in the summary export
    group: str | None = None  # the page's table (a claim) it sits in; None: in the key columns of every one
    glance: str | None = None  # its line at a glance, as a figure measured (no written pass condition)
    repeated: tuple[str, int] | None = None  # (heading, digits) of its median over runs, in the repeats table


CLAIMS_1_2 = "Claims 1 and 2: capacity and retrieval in a fresh document"
CLAIM_3 = "Claim 3: the growing conversation"
MANY_USERS = "Many users"
TRAFFIC = "Traffic that comes back: a replayed trace, returning users"
QUALITY = "Quality"

EVIDENCE_COLUMNS: tuple[Column, ...] = (
    Column("deployment", "deployment"),
    Column("status", "status"),
    Column("capacity", "1 capacity", CLAIMS_1_2),
    Column("retrieval", "2 retrieval k/n", CLAIMS_1_2),
    Column("recall_alone", "3 recall alone", CLAIM_3),
    Column("recall_shared", "3 recall, 2 users", CLAIM_3),
    Column("ttft_alone", "last-turn TTFT alone", CLAIM_3, repeated=("last-turn TTFT alone, s", 2)),
    Column("ttft_shared", "last-turn TTFT, 2 users", CLAIM_3),
    Column("decode_alone", "decode alone", CLAIM_3, repeated=("last-turn decode alone, tok/s", 1)),
    Column("decode_shared", "decode, 2 users", CLAIM_3),
    Column(
        "stall",
        "decode under prefill",
        CLAIM_3,
        glance="3 decode under another user's prefill",
        repeated=("decode stall under prefill, x", 1),
    ),
    Column("cost", "cost", CLAIM_3),
    Column(
        "throughput",
        "many users: output tok/s",
        MANY_USERS,
        glance="many users, closed loop",
        repeated=("many users, best output tok/s", 0),
    ),
    Column("throughput_cost", "many users: cost", MANY_USERS),
    Column("open_loop", "many users: rate kept up", MANY_USERS, glance="many users, open loop"),
    Column("slo", "many users: most within the SLO", MANY_USERS, glance="many users, within the SLO"),
    Column("trace", "trace replay", TRAFFIC, glance="trace replay"),
    Column("returning", "returning users", TRAFFIC, glance="returning users"),
    Column("quality", "GSM8K (flexible) [95%]", QUALITY, glance="quality"),
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
