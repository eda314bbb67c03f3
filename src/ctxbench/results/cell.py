"""One cell of the evidence table: a value and the file it came from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    """A value and the file it came from (relative to the results directory)."""

    text: str
    source: str = ""
    value: float | None = None


MISSING = Cell("not run")
