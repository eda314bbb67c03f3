"""Claim 2 by retrieval task, as the evidence reads it: each task's found/scored over its grid and its own
short-context control. A run from before tasks (or of the single task alone) is one result, unnamed, so its
cell and reasons read as they always did."""

from __future__ import annotations

from dataclasses import dataclass

from ...measure.stats import wilson
from .file import Control, NeedleFile


@dataclass(frozen=True)
class TaskResult:
    task: str
    found: int
    scored: int
    control: Control | None
    alone: bool  # the run's only task is the single literal fact: named as before, without the task

    def text(self) -> str:
        """'multi_key 2/3 [0.21, 0.94]', and '(fails at the 1024-token control)' where its control missed."""
        interval = wilson(self.found, self.scored)
        missed = self.control if self.control is not None and self.control.missed else None
        control = f" (fails at the {missed.length}-token control)" if missed else ""
        if interval is None:  # every prompt of the task skipped or failed: nothing to count, never 0/0
            return f"{self.task} not scored{control}"
        return f"{self.task} {self.found}/{self.scored} [{interval.low:.2f}, {interval.high:.2f}]{control}"


def task_results(needle: NeedleFile) -> list[TaskResult]:
    """One result per task run, in order."""
    names = needle.task_names()
    alone = names == ["single"]
    out = []
    for task in names:
        mine = needle.task_recall(task)
        recall = mine.recall_by_length.values()
        found, scored = sum(r.found for r in recall), sum(r.scored for r in recall)
        out.append(TaskResult(task, found, scored, mine.control, alone))
    return out
