"""Claim 2, retrieval in a fresh document, one folder: the check (`check.py`: the short-context control, then
a grid of lengths x depths of fresh prompts, each a fact planted and asked back), its parameters
(`params.py`, the flags of `ctxbench needle`), its summary file (`file.py`), each task's result
(`retrieval.py`), its run-report section and console line (`section.py`), its evidence column, cell,
judgement and glance line (`cell.py`), and its evidence-page figures and answers (`figures.py`). The ramp's
verdict reads which tasks failed their own control (`blind_tasks`); the evidence page lists every answer
(`answers`)."""

from .cell import blind_tasks
from .check import NEEDLE
from .figures import answers
from .params import NeedleParams

__all__ = ["NEEDLE", "NeedleParams", "answers", "blind_tasks"]
