"""Cache fidelity, one folder: the check (`check.py`), its parameters (`params.py`), its summary file
(`file.py`), its run-report section and console line (`section.py`), its evidence column, cell and what it
says of a run's status (`cell.py`)."""

from .check import FIDELITY
from .params import FidelityParams  # the ad-hoc command's flags are its fields

__all__ = ["FIDELITY", "FidelityParams"]
