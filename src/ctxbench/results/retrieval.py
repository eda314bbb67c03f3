"""Claim 2 by retrieval task, as the evidence reads it: each task's found/scored over its grid and its own
short-context control. A run from before tasks (or of the single task alone) is one result, unnamed, so its
cell and reasons read as they always did."""

from __future__ import annotations

from dataclasses import dataclass

from ..check_files import Control, NeedleFile
from ..stats import wilson


@dataclass(frozen=True)
class TaskResult:
    task: str
    found: int
    scored: int
    control: Control | None
    alone: bool  # the run's only task is the single literal fact: named as before, without the task

    def text(self) -> str:
        """'multi_key 2/3 [0.21, 0.94]', or '... fails at the control' where its control missed."""
        if self.control is not None and self.control.missed:
            return f"{self.task} fails at the {self.control.length}-token control"
        interval = wilson(self.found, self.scored)
        bounds = "" if interval is None else f" [{interval.low:.2f}, {interval.high:.2f}]"
        return f"{self.task} {self.found}/{self.scored}{bounds}"


def task_results(needle: NeedleFile) -> list[TaskResult]:
    """One result per task run, in order."""
    names = needle.task_names()
    alone = names == ["single"]
    out = []
    for task in names:
        recall = needle.tasks[task].recall_by_length if task in needle.tasks else needle.recall_by_length
        control = needle.tasks[task].control if task in needle.tasks else needle.control
        found, scored = sum(r.found for r in recall.values()), sum(r.scored for r in recall.values())
        out.append(TaskResult(task, found, scored, control, alone))
    return out
