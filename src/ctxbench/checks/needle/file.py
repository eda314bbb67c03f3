"""`needle.json`: claim 2's trials (each planted fact asked back: skipped, failed or scored), recall by length
over every task, each task's own recall and its short-context control (frozen figures: store/check_files.py
says how they are read)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict

from ...store.check_files import CheckFile, _Open


class NeedleTrial(_Open):
    """One planted fact asked back: skipped (`skipped` says why), failed (`error`) or scored (`found`)."""

    model_config = ConfigDict(frozen=True)

    length: int
    depth: float
    request_id: str
    seed: int
    planned_tokens: int | None
    prompt_tokens: int | None
    cached_tokens: int | None
    ttft_s: float | None
    found: bool | None
    expected: str | None
    answer: str
    skipped: str | None
    error: str | None
    cache_hit_suspected: bool
    control: bool = False  # the short-context control, not a length of the grid
    task: str = "single"  # the retrieval task (text/tasks.py); runs before tasks were single
    reuse: bool = False  # a later question of multi_depth: its document read back from the cache on purpose

    @property
    def error_kind(self) -> str | None:
        """The kind of a failed trial's error (`RequestError.kind`, written as "kind: message")."""
        return self.error.split(":", 1)[0] if self.error else None

    @property
    def count_error_tokens(self) -> int | None:
        if self.prompt_tokens is None or self.planned_tokens is None:
            return None
        return self.prompt_tokens - self.planned_tokens


class Recall(_Open):
    found: int
    scored: int

    @property
    def missed(self) -> bool:
        """Some scored trial missed (nothing scored: nothing known, not a miss)."""
        return self.scored > 0 and self.found < self.scored


class Control(Recall):
    length: int


class TaskRecall(_Open):
    """One retrieval task's recall by length over its grid, and its own control."""

    task: str
    recall_by_length: dict[str, Recall]
    control: Control | None = None


class NeedleFile(CheckFile):
    """Claim 2: the grid's trials and recall by length (every task together); the short-context control's
    count apart; each task's own recall and control (`tasks`: absent before there were tasks, which is the
    single task alone)."""

    FILE: ClassVar[str] = "needle.json"
    recall_by_length: dict[str, Recall]
    control: Control | None = None  # None: no control asked (or a run from before it existed)
    tasks: list[TaskRecall] = []  # in the order they ran
    depth_curve: bool = False  # the depths were asked as a curve: the report draws recall by depth
    trials: list[NeedleTrial]

    def task_names(self) -> list[str]:
        """The tasks run, in order (a run from before tasks: the single task)."""
        return [t.task for t in self.tasks] or ["single"]

    def task_recall(self, task: str) -> TaskRecall:
        """A task's own recall and control; a run from before tasks: the whole file's, as the single task."""
        for mine in self.tasks:
            if mine.task == task:
                return mine
        return TaskRecall(task=task, recall_by_length=self.recall_by_length, control=self.control)

    def recall_sorted(self) -> list[tuple[int, Recall]]:
        return sorted((int(length), r) for length, r in self.recall_by_length.items())

    def recall_text(self, length: int, recall: Recall, control: bool = False) -> str:
        """ "k/n" where something was scored (and how many failed beside it); else what happened in words:
        skipped (why), failed (how many, the first error), never 0/0."""
        trials = [t for t in self.trials if t.length == length and t.control == control]
        failed = [t for t in trials if t.error is not None]
        if recall.scored:
            return f"{recall.found}/{recall.scored}" + (f" ({len(failed)} failed)" if failed else "")
        if failed:
            first = (failed[0].error or "").split(" (", 1)[0][:100]
            return f"not scored: {len(failed)} of {len(trials)} failed (first: {first})"
        skipped = [t for t in trials if t.skipped]
        if skipped:
            return f"skipped: {(skipped[0].skipped or '').split(';')[0]}"
        return "not scored"
