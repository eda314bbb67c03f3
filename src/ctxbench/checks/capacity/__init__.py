"""Claim 1, capacity, one folder: the check (`check.py`: a fresh prompt just under the server's limit, one
over it), its parameters (`params.py`), its summary file (`file.py`), its run-report section and console
line (`section.py`), its evidence column and cell, its glance line and what it says of a run's status
(`cell.py`)."""

from .check import CAPACITY
from .params import CapacityParams

__all__ = ["CAPACITY", "CapacityParams"]
