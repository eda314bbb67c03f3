"""Claim 2's evidence: its column (`retrieval`), the cell (k/n to the longest length scored, each task's
with its Wilson interval where several ran), what its results say of the run's status (a task below n/n, or
failing its own short-context control; skipped prompts; planned lengths the server counted otherwise) and
its line at a glance, with the misses named."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ...records import not_planned_head
from ...render.cell import FAIL, NO_VERDICT, NOISE, PASS, Cell, Glance, named_misses
from ...render.column import CLAIMS_1_2, Column, Guide
from ...store.run_dir import RunDir
from ...store.run_files import NIAH_LOG
from ..base import Judgement
from .file import NeedleFile, NeedleTrial
from .retrieval import task_results

CONTROL_FAILED = "fails at the {length}-token control too: the model or its template, not the context"

NEEDLE_COLUMNS: tuple[Column, ...] = (
    Column(
        "retrieval",
        "2 retrieval k/n",
        CLAIMS_1_2,
        guide=Guide(
            "Complete recall on every sampled check",
            "one-shot retrieval n/n and conversation recall n/n alone and with 2 users, at the sampled "
            "lengths and depths only; not a broad reasoning evaluation",
            among="complete recall",
            caveat=False,
            listed="names",
            missing=(
                "Complete recall on every sampled check",
                "none",
                "one-shot retrieval n/n and conversation recall n/n alone and with 2 users, at the sampled "
                "lengths and depths only; not a broad reasoning evaluation",
            ),
        ),
    ),
)


def needle_cells(results: Path, run: RunDir) -> dict[str, Cell]:
    """The retrieval cell: k/n to the longest length scored (each task's own where several ran), or what
    kept it from being scored."""
    needle = NeedleFile.load(run.path)
    if needle is None:
        return {}
    recall = needle.recall_by_length
    k = sum(r.found for r in recall.values())
    n = sum(r.scored for r in recall.values())
    longest = max((length for length, r in needle.recall_sorted() if r.scored), default=0)
    unplanned = [t for t in needle.trials if t.error_kind == "prompt_not_planned"]
    control = needle.control
    verdict = f"; {CONTROL_FAILED.format(length=control.length)}" if control and control.missed else ""
    skipped = _skipped(needle)
    if unplanned:
        text = (
            f"FAILS: {len(unplanned)} prompt(s) not as planned ({not_planned_head(unplanned[0].error or '')})"
        )
    elif n == 0 and skipped:
        text = f"not run: {len(skipped)} prompt(s) skipped ({skipped[0]})"
    elif n == 0:
        unanswered = [t for t in needle.trials if t.error is not None]
        first = (unanswered[0].error or "").split(" (", 1)[0][:80] if unanswered else "nothing answered"
        text = f"not scored: {len(unanswered)} of {len(needle.trials)} failed (first: {first})"
    elif needle.task_names() != ["single"]:
        text = f"{'; '.join(t.text() for t in task_results(needle))} (to {longest} tokens)"
    else:
        text = f"{k}/{n} (to {longest} tokens){verdict}"
    complete = not unplanned and n > 0
    source = str((run.path / NIAH_LOG).relative_to(results))
    return {"retrieval": Cell(text, source, scored=(k, n) if complete else None)}


def _skipped(needle: NeedleFile) -> list[str]:
    return [f"{t.length} tokens: {(t.skipped or '').split(';')[0]}" for t in needle.trials if t.skipped]


def judgement_of(run: RunDir) -> Judgement:
    """What claim 2's results say of the run's status (docs/validation.md): each task below n/n, or failing
    its own control (then no long-context verdict); prompts skipped; planned lengths the server counted
    otherwise, within the tolerance."""
    needle = NeedleFile.load(run.path)
    if needle is None:
        return Judgement()
    reasons = []
    for task in task_results(needle):
        named = "" if task.alone else f" ({task.task})"
        if task.control is not None and task.control.missed:
            reasons.append(
                f"retrieval{named} {CONTROL_FAILED.format(length=task.control.length)} "
                f"({task.control.found}/{task.control.scored}): no long-context verdict is drawn"
            )
        elif task.found < task.scored:
            reasons.append(f"one-shot retrieval{named} {task.found}/{task.scored} is below n/n")
    skipped = _skipped(needle)
    if skipped:
        reasons.append(f"{len(skipped)} needle prompt(s) skipped, not scored: {skipped[0]}")
    errors = [
        t.prompt_tokens - t.planned_tokens
        for t in needle.trials
        if t.planned_tokens and t.prompt_tokens and t.prompt_tokens != t.planned_tokens
    ]
    if errors:
        worst = max(errors, key=abs)
        reasons.append(
            f"{len(errors)} planned prompt length(s) differ from the server's count (by up to {worst:+d} "
            "tokens, within the tolerance; docs/metrics.md)"
        )
    return Judgement(results=tuple(reasons))


def blind_tasks(run: RunDir) -> set[str]:
    """The retrieval tasks whose short-context control missed: the model fails the task itself, so its
    misses at length (the needle's, or a ramp asking that task) say nothing of the context."""
    needle = NeedleFile.load(run.path)
    results = task_results(needle) if needle is not None else []
    return {t.task for t in results if t.control is not None and t.control.missed}


def glance_lines(run: RunDir, cells: Mapping[str, Cell]) -> list[Glance]:
    """Its line at a glance: PASS or FAIL with the misses named; not judged for random weights, and no
    verdict where every task failed its own control."""
    cell = cells.get("retrieval")
    needle = NeedleFile.load(run.path)
    if cell is None or not cell.source or needle is None:
        return []
    results = task_results(needle)
    blind = blind_tasks(run)
    trials = [t for t in needle.trials if t.task not in blind]
    misses = _misses(trials, named=bool(results) and not results[0].alone)
    every = bool(results) and blind == {t.task for t in results}
    random_weights = run.manifest().random_weights
    verdict = NOISE if random_weights else NO_VERDICT if every else (FAIL if misses else PASS)
    return [Glance("2 retrieval, fresh document", verdict, cell, named_misses(misses))]


def _misses(trials: Sequence[NeedleTrial], named: bool) -> list[str]:
    """Each miss and skip, the task named where the run asked more than the single fact."""

    def where(t: NeedleTrial) -> str:
        return f"{t.task} " * named + f"{t.length} tokens at depth {t.depth:.0%}"

    return [f"{where(t)} (answered {str(t.answer)[:24]!r})" for t in trials if t.found is False] + [
        f"{where(t)} skipped" for t in trials if t.skipped
    ]
