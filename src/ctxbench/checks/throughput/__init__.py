"""Many users, short prompts, one folder: the check (`check.py`: closed-loop levels, open-loop rates, the SLO
search, recall under load, each a unit of `throughput.json`), a level's users in this process, over worker
processes (`closed_loop.py`, `worker.py`) or Ray actors (`ray.py`), recall under load
(`recall_under_load.py`), its summary file (`file.py`), its run-report section and console lines
(`section.py`, with the SLO search's `search_section.py` and the MLPerf Endpoints view `endpoints.py`), its
evidence columns and cells (`cell.py`), its page figures (`figures.py`) and side-by-side rows
(`comparison.py`)."""

from .check import THROUGHPUT

__all__ = ["THROUGHPUT"]
