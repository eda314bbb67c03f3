"""Claim 2, retrieval in a fresh document: a hidden fact planted at sampled depths, answer checked.

A grid of lengths x depths; every prompt is fresh (its own seed, its own header), so no result can
come back from a prefix cache, and any cached tokens beyond its cache intent (the lead every prompt shares)
are flagged. A length over the server's limit is skipped with a recorded reason unless forced.

Before the grid, the short-context control: the same task at `control` tokens (1K by default) at each
depth. A model that misses there fails the task itself (a base model that does not answer questions, a
template that garbles the prompt), so the grid's misses say nothing about long contexts.

Each retrieval task of `task` (text/tasks.py: what is planted, asked and scored) runs its own control and
grid, in the order listed. `multi_depth` builds one document per length with a fact at every depth and asks
its questions in turn over it: the first is a fresh prompt, the others read the same document back from the
prefix cache on purpose (labelled `reuse = document`; their cache intent allows the document).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...client.chat import ChatClient
from ...measure import metrics
from ...records import CacheIntent, RequestRecord
from ...render.cell import Cell, Glance
from ...render.figure_layout import PageRun
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...store.run_files import NIAH_LOG
from ...text.haystack import Haystack, UnitPool, build_planted, lead_tokens, request_seed
from ...text.tasks import Knobs, Planted, TaskName, expected_text, task_named
from ..base import Check, Judgement, RunContext
from .cell import NEEDLE_COLUMNS, glance_lines, judgement_of, needle_cells
from .figures import figures
from .file import Control, NeedleFile, NeedleTrial, Recall, TaskRecall
from .labels import NeedleLabels
from .params import NeedleParams
from .section import console_lines, needle_section


def recall_by_length(trials: Sequence[NeedleTrial]) -> dict[int, tuple[int, int]]:
    """length -> (found k, scored n) over the grid (the control left out); skipped and failed requests are
    not scored."""
    table: dict[int, tuple[int, int]] = {}
    for trial in sorted((t for t in trials if not t.control), key=lambda t: t.length):
        k, n = table.get(trial.length, (0, 0))
        if trial.found is not None:
            table[trial.length] = (k + int(trial.found), n + 1)
        else:
            table.setdefault(trial.length, (k, n))
    return table


def log_line(trial: NeedleTrial) -> str:
    """One human-readable niah.log line."""
    task = "" if trial.task == "single" else f"task={trial.task} "
    head = ("control " if trial.control else "") + f"{task}length={trial.length} depth={trial.depth:.2f}"
    if trial.skipped:
        return f"{head} SKIPPED: {trial.skipped}"
    if trial.error:
        return f"{head} FAILED: {trial.error}"
    error = trial.count_error_tokens
    ttft = "n/a" if trial.ttft_s is None else f"{trial.ttft_s:.3f}s"  # None: a record that cannot be true
    return (
        f"{head} prompt_tokens={trial.prompt_tokens} (planned {trial.planned_tokens}, "
        f"error {'n/a' if error is None else f'{error:+d}'}) cached={trial.cached_tokens} "
        f"ttft={ttft} found={'yes' if trial.found else 'no'} expected={trial.expected} "
        f"answer={json.dumps(trial.answer[:120])}"
        + (" CACHE-HIT-SUSPECTED" if trial.cache_hit_suspected else "")
    )


@dataclass(frozen=True)
class _Document:
    """One fresh document of a task: its length, the depths its asked facts sit at (one, or every depth of
    the length for multi_depth), its seed and each question's request id."""

    task: TaskName
    length: int
    depths: tuple[float, ...]
    control: bool
    seed: int
    request_ids: tuple[str, ...]


def _documents(
    params: NeedleParams, run: RunDir, seed_scope: tuple[str, ...], reuse_seed: bool
) -> list[_Document]:
    """Every task's documents in run order: each task's control, then its grid. The single task's seeds and
    request ids are those it always had, so an old campaign sends the same prompts."""
    control = params.control_length()
    documents = []
    made: Counter[str] = Counter()

    def request_id(base: str) -> str:
        # one request id is one request: a depth given twice (or two that print alike) gets its own
        made[base] += 1
        return run.request_id(base if made[base] == 1 else f"{base}-{made[base]}")

    for task in params.task:
        grid = [(control, depth, True) for depth in params.depths] if control else []
        grid += [(length, depth, False) for length in params.lengths for depth in params.depths_for(length)]
        groups: list[list[tuple[int, float, bool]]] = []
        for item in grid:  # multi_depth: the depths of one length (or of the control) share a document
            if task == "multi_depth" and groups and groups[-1][0][::2] == item[::2]:
                groups[-1].append(item)
            else:
                groups.append([item])
        index = 0
        for group in groups:
            length, _, is_control = group[0]
            name = "needle-control" if is_control else "needle"
            tag = ("" if task == "single" else f"-{task}") + ("-reused-seed" if reuse_seed else "")
            parts = ("needle",) if task == "single" else ("needle", task)
            documents.append(
                _Document(
                    task,
                    length,
                    tuple(depth for _, depth, _ in group),
                    is_control,
                    request_seed(*seed_scope, *parts, 0 if reuse_seed else index),
                    tuple(request_id(f"{name}{tag}-{length}-{depth:.2f}") for _, depth, _ in group),
                )
            )
            index += len(group)
    return documents


async def run_needle(
    client: ChatClient,
    pool: UnitPool,
    params: NeedleParams,
    run: RunDir,
    seed_scope: tuple[str, ...],
    limit_tokens: int | None = None,
    on_trial: Callable[[NeedleTrial], None] | None = None,
    *,
    force: bool = False,
    reuse_seed: bool = False,
) -> list[NeedleTrial]:
    """Run every task's control and grid one request at a time; append each record, niah.log line and trial
    as it ends.

    `force` sends lengths over the server's limit too; `reuse_seed` gives every prompt the same seed (only to
    show what the cache audit catches)."""
    lead = lead_tokens(pool.counter)
    trials: list[NeedleTrial] = []
    with (run.path / NIAH_LOG).open("a") as log:
        for document in _documents(params, run, seed_scope, reuse_seed):
            if limit_tokens is not None and document.length + params.max_tokens > limit_tokens and not force:
                reason = (
                    f"{document.length} + {params.max_tokens} output tokens is over the server's limit of "
                    f"{limit_tokens}; set over_limit (--force) to send it anyway"
                )
                asked = [
                    _skipped(document, depth, request_id, reason) for depth, request_id in _pairs(document)
                ]
            else:
                asked = await _ask(client, pool, params, run, document, lead)
            for trial in asked:
                trials.append(trial)
                log.write(log_line(trial) + "\n")
                log.flush()
                if on_trial is not None:
                    on_trial(trial)
    control = params.control_length()
    NeedleFile(
        recall_by_length=_recall(trials),
        control=_control(trials, control),
        tasks=[
            TaskRecall(
                task=task,
                recall_by_length=_recall([t for t in trials if t.task == task]),
                control=_control([t for t in trials if t.task == task], control),
            )
            for task in params.task
        ],
        depth_curve=params.depth_curve,
        trials=trials,
    ).save(run.path)
    return trials


def _recall(trials: Sequence[NeedleTrial]) -> dict[str, Recall]:
    return {str(length): Recall(found=k, scored=n) for length, (k, n) in recall_by_length(trials).items()}


def _control(trials: Sequence[NeedleTrial], length: int | None) -> Control | None:
    controls = [t for t in trials if t.control and t.found is not None]
    if not length:
        return None
    return Control(length=length, found=sum(t.found is True for t in controls), scored=len(controls))


def _pairs(document: _Document) -> list[tuple[float, str]]:
    return list(zip(document.depths, document.request_ids, strict=True))


async def _ask(
    client: ChatClient,
    pool: UnitPool,
    params: NeedleParams,
    run: RunDir,
    document: _Document,
    lead: int,
) -> list[NeedleTrial]:
    """Build the document and ask its questions in turn; a trial per question."""

    def plan(rng: random.Random) -> Planted:
        knobs = Knobs(distractors=params.distractors, values=params.values, hops=params.hops)
        return task_named(document.task).plant(rng, document.depths, knobs)

    haystacks = build_planted(pool, document.length, document.seed, plan)
    trials = []
    for turn, (haystack, (depth, request_id)) in enumerate(zip(haystacks, _pairs(document), strict=True)):
        question = haystack.question
        assert question is not None  # build_planted gives every prompt its question
        reuse = turn > 0  # a later question over the same document: read back from the cache on purpose
        intent = (
            CacheIntent.reusing(
                "document",
                lead,
                max(h.planned_tokens for h in haystacks[:turn]),
                f"question {turn + 1} over the document the earlier questions sent",
            )
            if reuse
            else CacheIntent.fresh(lead, f"a fresh {document.length}-token document")
        )
        record = await client.chat(
            haystack.messages,
            max_tokens=params.max_tokens,
            request_id=request_id,
            labels=NeedleLabels(
                length=document.length,
                depth=depth,
                planned_tokens=haystack.planned_tokens,
                reuse="document" if reuse else None,
                control=document.control,
                task=None if document.task == "single" else document.task,
                **NeedleLabels.answer(question),
            ).written(),
            extra_body={"temperature": 0.0},
            cache=intent,
        )
        run.append(record)
        trials.append(_trial(document, depth, haystack, record, intent))
    return trials


def _skipped(document: _Document, depth: float, request_id: str, reason: str) -> NeedleTrial:
    return NeedleTrial(
        length=document.length,
        depth=depth,
        request_id=request_id,
        seed=document.seed,
        planned_tokens=None,
        prompt_tokens=None,
        cached_tokens=None,
        ttft_s=None,
        found=None,
        expected=None,
        answer="",
        skipped=reason,
        error=None,
        cache_hit_suspected=False,
        control=document.control,
        task=document.task,
    )


def _trial(
    document: _Document, depth: float, haystack: Haystack, record: RequestRecord, intent: CacheIntent
) -> NeedleTrial:
    cached = metrics.cached_tokens(record)
    error = None if record.error is None else f"{record.error.kind}: {record.error.message}"
    question = haystack.question
    found = None if error or question is None else question.score(record.text)
    return NeedleTrial(
        length=document.length,
        depth=depth,
        request_id=record.request_id,
        seed=haystack.seed,
        planned_tokens=haystack.planned_tokens,
        prompt_tokens=metrics.prompt_tokens(record),
        cached_tokens=cached,
        ttft_s=metrics.ttft_s(record),
        found=found,
        expected=expected_text(question) if question else None,
        answer=record.text.strip(),
        skipped=None,
        error=error,
        cache_hit_suspected=intent.exceeded_by(cached),
        control=document.control,
        task=document.task,
        reuse=intent.reuse == "document",
    )


class NeedleCheck(Check[NeedleParams]):
    name = "needle"
    params_type = NeedleParams
    claim = True
    fresh_only = True
    needs_limit = True

    def label(self, labels: Mapping[str, str]) -> str:
        own = NeedleLabels.parse(labels)
        return f"needle {own.length} d={'' if own.depth is None else f'{own.depth:.2f}'}"

    def stage(self, labels: Mapping[str, str]) -> str | None:
        """A length (a retrieval task other than single named), its control apart."""
        own = NeedleLabels.parse(labels)
        task = f"{own.task}-" if own.task else ""
        return f"needle-{task}{own.length}" + ("-control" if own.control else "")

    def request_count(self, params: NeedleParams) -> int:
        return params.trial_count()

    def longest_prompt(self, params: NeedleParams, limit_tokens: int) -> int | None:
        return max(self.resolved(params, limit_tokens).lengths)

    @staticmethod
    def resolved(params: NeedleParams, limit_tokens: int) -> NeedleParams:
        """No lengths given: one length, the server's limit less the reply (and a little slack)."""
        if params.lengths:
            return params
        return params.model_copy(update={"lengths": [limit_tokens - params.max_tokens - 16]})

    def announce(self, params: NeedleParams, ctx: RunContext) -> str | None:
        lengths = list(self.resolved(params, ctx.stated).lengths)
        tasks = "" if params.task == ["single"] else f" ({', '.join(params.task)})"
        return f"claim 2: planted facts{tasks} in fresh documents of {lengths} tokens"

    async def run(self, ctx: RunContext, params: NeedleParams) -> None:
        needle = self.resolved(params, ctx.stated)

        def done(trial: NeedleTrial) -> None:
            ctx.say(log_line(trial))
            ctx.advance()

        await run_needle(
            ctx.client, ctx.pool, needle, ctx.run, ctx.scope, ctx.stated, done, force=params.over_limit
        )

    # its reporting, from this folder: the run report's section, the evidence cell and column, its part in
    # the run's status, its line at a glance, the console line and the evidence page's figures
    columns = NEEDLE_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return needle_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return needle_cells(results, run)

    def judge(self, run: RunDir, random_weights: bool) -> Judgement:
        return judgement_of(run)

    def glance(self, run: RunDir, cells: Mapping[str, Cell]) -> list[Glance]:
        return glance_lines(run, cells)

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)

    def figures(self, results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
        return figures(results, runs)


NEEDLE = NeedleCheck()
