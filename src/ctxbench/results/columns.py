"""The evidence table's columns, each one `Column`: its key (the `Row` field), its heading, the claim group
the page draws it in, its line at a glance where it is a figure to read (not a pass or fail), and its
heading in the repeats table where it is compared over runs, and how the decision guide reads it. The
evidence table, the page's tables, the repeats table, the glance, the decision guide and the summary export
all read `EVIDENCE_COLUMNS`; a new column is one entry here (and its `Row` field and cell)."""

from __future__ import annotations

from collections.abc import Sequence

from ..checks.catalog import CHECKS
from ..render.column import CLAIM_3, CLAIMS_1_2, FIDELITY, MANY_USERS, QUALITY, TRAFFIC, Column, Guide


def _own(group: str) -> tuple[Column, ...]:
    """The columns of `group` that checks declare in their own folder (`Check.columns`), catalog order."""
    return tuple(c for check in CHECKS if check.own_report for c in check.columns if c.group == group)


EVIDENCE_COLUMNS: tuple[Column, ...] = (
    Column("deployment", "deployment"),
    Column("status", "status"),
    *_own(CLAIMS_1_2),
    Column("recall_alone", "3 recall alone", CLAIM_3),
    Column("recall_shared", "3 recall, 2 users", CLAIM_3),
    Column(
        "ttft_alone",
        "last-turn TTFT alone",
        CLAIM_3,
        repeated=("last-turn TTFT alone, s", 2),
        guide=Guide(
            "Fastest growing conversation with complete recall",
            "at the context its ramp reached, on this node; recall {recall_alone} alone, {recall_shared} "
            "with 2 users",
            among="complete recall",
            answer="last turn {text} to the first token, decode {decode_alone}",
            missing=(
                "Fastest growing conversation with complete recall",
                "no deployment recalled the planted fact on every turn of its ramp",
                "complete recall alone and with 2 users is required before speed is compared",
            ),
        ),
    ),
    Column("ttft_shared", "last-turn TTFT, 2 users", CLAIM_3),
    Column("decode_alone", "decode alone", CLAIM_3, repeated=("last-turn decode alone, tok/s", 1)),
    Column("decode_shared", "decode, 2 users", CLAIM_3),
    Column(
        "stall",
        "decode under prefill",
        CLAIM_3,
        glance="3 decode under another user's prefill",
        repeated=("decode stall under prefill, x", 1),
        guide=Guide(
            "Decode that holds up while another user prefills",
            "pooled over its 2-user ramp; smaller is better",
            among="every row",
        ),
    ),
    Column(
        "cost",
        "cost",
        CLAIM_3,
        guide=Guide(
            "Cheapest per token in a 2-user conversation",
            "tokens the server processed (new prompt + output) over the 2-user ramp",
            missing=(
                "Cheapest per token",
                "not computed",
                "no run states its GPU count (CPU runs have no GPU cost)",
            ),
        ),
    ),
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
