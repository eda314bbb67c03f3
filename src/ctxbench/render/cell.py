"""One cell of the evidence table: its text, the file it came from, the number readings compare, and the
verdicts a reader of the cell needs as typed fields (never parsed back out of the text)."""

from __future__ import annotations

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
