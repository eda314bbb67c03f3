"""Agent sessions, one folder: the check (`check.py`), the replay of recorded sessions (`recorded.py`; its
`describe_trace` is what the dry run reads of a trace, `check_fits` what it refuses for a slot), its summary
file (`file.py`), its run-report section (`section.py`), its evidence column and cell, the planner's forecast
for a run and its console line (`cell.py`)."""

from .check import SESSIONS
from .recorded import check_fits, describe_trace

__all__ = ["SESSIONS", "check_fits", "describe_trace"]
