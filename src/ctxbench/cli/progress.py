"""Progress for a terminal (rich's live bar) or for a log (a plain line every few seconds).

Piped into a file or a CI log, rich draws nothing until the end; a 1M-token prefill can take minutes,
so a log gets `requests: 12/58 (0:03:10)` every `CTXBENCH_PROGRESS_S` seconds (default 10) while
anything runs, and once more when the work ends. Lines are never wrapped (paths stay whole).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

DEFAULT_INTERVAL_S = 10.0


def progress(console: Console, shown: str = "{task.completed}/{task.total}") -> Progress | PlainProgress:
    """rich's bar on a terminal; `PlainProgress` otherwise. `shown`: the bar's count column."""
    if console.is_terminal:
        return Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn(shown),
            TimeElapsedColumn(),
            console=console,
        )
    return PlainProgress(console, interval_s=_interval())


def _interval() -> float:
    text = os.environ.get("CTXBENCH_PROGRESS_S", "")
    try:
        return max(0.1, float(text)) if text else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0.0


class PlainProgress:
    """The parts of rich's `Progress` the commands use (`add_task`, `advance`, `update`, `console`), as
    plain lines on a timer."""

    def __init__(self, console: Console, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.console = console
        self.interval_s = interval_s
        self._tasks: list[_Task] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._tick, name="ctxbench-progress", daemon=True)

    def __enter__(self) -> PlainProgress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._print()

    @property
    def tasks(self) -> list[_Task]:
        return list(self._tasks)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> TaskID:
        with self._lock:
            self._tasks.append(_Task(description, total))
            return TaskID(len(self._tasks) - 1)

    def advance(self, task: TaskID, advance: float = 1) -> None:
        with self._lock:
            self._tasks[task].completed += advance

    def update(
        self,
        task: TaskID,
        *,
        completed: float | None = None,
        total: float | None = None,
        description: str | None = None,
        **_: Any,
    ) -> None:
        with self._lock:
            entry = self._tasks[task]
            entry.completed = entry.completed if completed is None else completed
            entry.total = entry.total if total is None else total
            entry.description = entry.description if description is None else description

    def line(self) -> str:
        """`requests: 12/58 (0:03:10)`, one part per task."""
        elapsed = int(time.monotonic() - self._started)
        clock = f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
        with self._lock:
            parts = [
                f"{t.description}: {t.completed:g}" + (f"/{t.total:g}" if t.total is not None else "")
                for t in self._tasks
            ]
        return f"{', '.join(parts)} ({clock})"

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._print()

    def _print(self) -> None:
        if self._tasks:
            self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)


class RequestTally:
    """A campaign's requests on a progress bar: the total starts as what the checks plan, follows a check that
    sends more than it planned (the count never passes the total, "95/89"), and becomes what ran as each
    deployment ends (a sweep that stopped early, a resume)."""

    def __init__(self, bar: Progress | PlainProgress, task: TaskID, planned: dict[str, int]) -> None:
        self.bar, self.task, self.planned = bar, task, planned
        self.sent = 0  # requests since the last deployment ended
        self.raised = 0  # what the total was raised by since then

    def done(self) -> None:
        self.sent += 1
        self.bar.advance(self.task)
        state = self.bar.tasks[self.task]
        if state.total is not None and state.completed > state.total:
            self.raised += int(state.completed - state.total)
            self.bar.update(self.task, total=state.completed)

    def ended(self, deployment: str) -> None:
        total = (self.bar.tasks[self.task].total or 0) - self.raised - self.planned[deployment] + self.sent
        self.bar.update(self.task, total=total)
        self.sent = self.raised = 0
