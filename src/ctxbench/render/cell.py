"""One cell of the evidence table: its text, the file it came from, the number readings compare, and the
verdicts a reader of the cell needs as typed fields (never parsed back out of the text)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    """A value and the file it came from (relative to the results directory)."""

    text: str
    source: str = ""
    value: float | None = None
    scored: tuple[int, int] | None = None  # (found, scored) where the cell is a recall count k/n
    client_behind: bool = False  # the client fell behind its schedule: the figure may be the client's


MISSING = Cell("not run")


def clause(text: str, most: int = 100) -> str:
    """`text` whole if short, else cut at the last clause or word boundary within `most` characters, never
    mid-word (the run report has the whole text)."""
    if len(text) <= most:
        return text
    head = text[:most]
    for mark in ("; ", ": ", ", ", " ("):
        if (at := head.rfind(mark)) > most // 2:
            return head[:at] + " ..."
    return head.rsplit(" ", 1)[0] + " ..."


# A glance line's verdicts (report/glance.py): pass or FAIL where the claim has a written pass condition,
# "measured" where the figure is the reader's to judge.
PASS, FAIL, MEASURED = "pass", "**FAIL**", "measured"
NOISE, UNSCORED = "not judged: random weights", "not scored"
NO_VERDICT = "no long-context verdict: fails at the short control"
NOT_CONCLUDED = "not concluded"


@dataclass(frozen=True)
class Glance:
    """One line of a run's first screen: what was checked, its verdict, the evidence cell, why not."""

    label: str
    verdict: str
    cell: Cell
    why: str = ""


def named_misses(misses: Sequence[str], shown: int = 3) -> str:
    """The first `shown` misses of a glance line's "why not", and how many more; a model's answer stays
    inside its table cell."""
    more = len(misses) - shown
    text = "; ".join(misses[:shown]) + (f"; and {more} more" if more > 0 else "")
    return " ".join(text.split()).replace("|", "\\|")
