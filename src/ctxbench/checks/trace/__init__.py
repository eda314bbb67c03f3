"""Trace replay, one folder: the check (`check.py`: a Mooncake-format trace replayed at its own times, its
shared hash ids as shared prompt prefixes), what the trace's blocks imply a cache may serve (`cache.py`, read
by the cache audit too), its parameters (`params.py`), its summary file (`file.py`), its run-report section
and console line (`section.py`), its evidence column and cell (`cell.py`)."""

from .cache import implied_cached, reuse_bound
from .check import TRACE, TraceFileError, read_trace, sample_trace

__all__ = ["TRACE", "TraceFileError", "implied_cached", "read_trace", "reuse_bound", "sample_trace"]
