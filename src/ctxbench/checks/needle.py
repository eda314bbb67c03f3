"""Claim 2, retrieval in a fresh document: a hidden fact planted at sampled depths, answer checked.

A grid of lengths x depths; every prompt is fresh (its own seed, its own header), so no result can
come back from a prefix cache, and any cached tokens beyond the chat template are flagged. A
length over the server's limit is skipped with a recorded reason unless forced.

Before the grid, the short-context control: the same task at `control` tokens (1K by default) at each
depth. A model that misses there fails the task itself (a base model that does not answer questions, a
template that garbles the prompt), so the grid's misses say nothing about long contexts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from .. import metrics
from ..chat_client import ChatClient
from ..check_files import Control, NeedleFile, NeedleTrial, Recall
from ..params import NeedleParams
from ..records import RequestRecord
from ..run_files import NIAH_LOG
from ..store import RunDir
from ..text.haystack import Haystack, UnitPool, build_haystack, request_seed, template_tokens
from .base import Check, RunContext

# Tokens two fresh prompts may share: the chat template's opening plus the first bytes of the header.
SHARED_PREFIX_SLACK = 8
CONTROL_FAILED = "fails at the {length}-token control too: the model or its template, not the context"


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
    head = ("control " if trial.control else "") + f"length={trial.length} depth={trial.depth:.2f}"
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
    """Run the grid one request at a time; append each record, niah.log line and trial as it ends.

    `force` sends lengths over the server's limit too; `reuse_seed` gives every prompt the same seed (only to
    show what the cache audit catches)."""
    template = template_tokens(pool.counter)
    allowance = template + SHARED_PREFIX_SLACK
    trials: list[NeedleTrial] = []
    control = params.control_length()
    grid = [(control, depth, True) for depth in params.depths] if control else []
    grid += [(length, depth, False) for length in params.lengths for depth in params.depths_for(length)]
    with (run.path / NIAH_LOG).open("a") as log:
        for index, (length, depth, is_control) in enumerate(grid):
            name = "needle-control" if is_control else "needle"
            request_id = run.request_id(f"{name}-{length}-{depth:.2f}")
            seed = request_seed(*seed_scope, "needle", 0 if reuse_seed else index)
            if limit_tokens is not None and length + params.max_tokens > limit_tokens and not force:
                reason = (
                    f"{length} + {params.max_tokens} output tokens is over the server's limit of "
                    f"{limit_tokens}; use --force to send it anyway"
                )
                trial = NeedleTrial(
                    length=length,
                    depth=depth,
                    request_id=request_id,
                    seed=seed,
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
                    control=is_control,
                )
            else:
                haystack = build_haystack(pool, length, seed, depth=depth)
                record = await client.chat(
                    haystack.messages,
                    max_tokens=params.max_tokens,
                    request_id=request_id,
                    labels={
                        "check": "needle",
                        "length": str(length),
                        "depth": f"{depth:.2f}",
                        "planned_tokens": str(haystack.planned_tokens),
                        "template_tokens": str(template),
                        **({"control": "1"} if is_control else {}),
                    },
                    extra_body={"temperature": 0.0},
                )
                run.append(record)
                trial = _trial(length, depth, haystack, record, allowance, is_control)
            trials.append(trial)
            log.write(log_line(trial) + "\n")
            log.flush()
            if on_trial is not None:
                on_trial(trial)
    controls = [t for t in trials if t.control and t.found is not None]
    NeedleFile(
        recall_by_length={
            str(length): Recall(found=k, scored=n) for length, (k, n) in recall_by_length(trials).items()
        },
        control=Control(length=control, found=sum(t.found is True for t in controls), scored=len(controls))
        if control
        else None,
        trials=trials,
    ).save(run.path)
    return trials


def _trial(
    length: int, depth: float, haystack: Haystack, record: RequestRecord, allowance: int, control: bool
) -> NeedleTrial:
    cached = metrics.cached_tokens(record)
    error = None if record.error is None else f"{record.error.kind}: {record.error.message}"
    needle = haystack.needle
    found = None if error or needle is None else needle.found_in(record.text)
    return NeedleTrial(
        length=length,
        depth=depth,
        request_id=record.request_id,
        seed=haystack.seed,
        planned_tokens=haystack.planned_tokens,
        prompt_tokens=metrics.prompt_tokens(record),
        cached_tokens=cached,
        ttft_s=metrics.ttft_s(record),
        found=found,
        expected=needle.value if needle else None,
        answer=record.text.strip(),
        skipped=None,
        error=error,
        cache_hit_suspected=cached is not None and cached > allowance,
        control=control,
    )


class NeedleCheck(Check[NeedleParams]):
    name = "needle"
    params_type = NeedleParams
    needs_limit = True

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
        return f"claim 2: planted facts in fresh documents of {lengths} tokens"

    async def run(self, ctx: RunContext, params: NeedleParams) -> None:
        needle = self.resolved(params, ctx.stated)
        await run_needle(ctx.client, ctx.pool, needle, ctx.run, ctx.scope, ctx.stated, on_trial=ctx.advance)


NEEDLE = NeedleCheck()
