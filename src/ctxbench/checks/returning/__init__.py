"""Returning users, one folder: the check (`check.py`), its summary file (`file.py`), its run-report section
and console line (`section.py`), its evidence column and cell (`cell.py`)."""

from .check import RETURNING, verdict_of

__all__ = ["RETURNING", "verdict_of"]
