"""Claim 3, the conversation ramp, one folder: the check (`check.py`: conversations growing turn by turn to
the longest context, alone and beside other users, each turn asking a planted fact back), its parameters
(`params.py`, the flags of `ctxbench ramp`), the campaign's ramp table (`table.py`, `ramp1m.csv`), its
run-report section and console lines (`section.py`, with the 2-user timeline `timeline.py`), its evidence
columns, cells, judgement and glance lines (`cell.py`) and its figures on the evidence page and in the
Markdown report (`figures.py`)."""

from .check import RAMP, ramp_schedule
from .labels import RampLabels
from .params import RampParams
from .table import RAMP_TABLE

__all__ = ["RAMP", "RAMP_TABLE", "RampLabels", "RampParams", "ramp_schedule"]
