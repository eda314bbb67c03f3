"""GSM8K quality, one folder: the check (`check.py`: sampled problems sent and scored as they end), the
problems and their scoring (`data.py`), its parameters (`params.py`), its results file (`file.py`: a line a
sample and a summary a run in the results' `quality/quality.jsonl`), its evidence column and cell
(`cell.py`)."""

from .check import QUALITY
from .data import load_problems
from .params import QualityParams  # the ad-hoc command's flags are its fields

__all__ = ["QUALITY", "QualityParams", "load_problems"]
