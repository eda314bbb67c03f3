"""Claim 1, capacity: the engine accepts a prompt near its configured limit, and rejects one over it.

The claim holds when a fresh prompt of (limit - output budget - margin) tokens gets a first token
back (prefill completed) and a prompt over the limit comes back as a clean, recorded rejection.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from ...client.chat import ChatClient
from ...engines.limits import ContextLimit
from ...measure import metrics
from ...records import CacheIntent, RequestRecord
from ...render.cell import Cell, Glance
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...text.haystack import UnitPool, build_haystack, lead_tokens, request_seed
from ..base import Check, Judgement, RunContext
from .cell import CAPACITY_COLUMNS, capacity_cells, glance_lines, judgement_of
from .file import CapacityFile
from .labels import NEAR_LIMIT, OVER_LIMIT, CapacityLabels
from .params import CapacityParams
from .section import capacity_section, console_lines


def prefill_rate(record: RequestRecord) -> float | None:
    """Prefill rate = (prompt tokens - cached tokens) / TTFT, tokens/s (the tokens the server computed)."""
    prompt = metrics.prompt_tokens(record)
    ttft = metrics.ttft_s(record)
    if prompt is None or not ttft:
        return None
    return (prompt - (metrics.cached_tokens(record) or 0)) / ttft


async def run_capacity(
    client: ChatClient,
    pool: UnitPool,
    limit: ContextLimit,
    params: CapacityParams,
    run: RunDir,
    seed_scope: tuple[str, ...],
) -> CapacityFile:
    """Send one fresh prompt just under the limit and one over it; write `capacity.json`."""
    lead = lead_tokens(pool.counter)

    async def send(prompt: Literal["near_limit", "over_limit"], tokens: int) -> tuple[int, RequestRecord]:
        """One fresh prompt of `tokens` (near: the first of the check's two seeds, over: the second), and
        the tokens it was planned to."""
        near = prompt == NEAR_LIMIT
        haystack = build_haystack(pool, tokens, request_seed(*seed_scope, "capacity", 0 if near else 1))
        record = await client.chat(
            haystack.messages,
            max_tokens=params.output_tokens,
            request_id=run.request_id("capacity-near" if near else "capacity-over"),
            labels=CapacityLabels(prompt=prompt, planned_tokens=haystack.planned_tokens).written(),
            extra_body={"temperature": 0.0},
            cache=CacheIntent.fresh(lead, f"a fresh prompt {'near' if near else 'over'} the limit"),
        )
        run.append(record)
        return haystack.planned_tokens, record

    target = limit.tokens - params.output_tokens - params.margin_tokens
    near_planned, near_record = await send(NEAR_LIMIT, target)
    over_planned, over_record = await send(OVER_LIMIT, limit.tokens + params.over_by_tokens)
    served = metrics.prompt_tokens(near_record)
    over_error = over_record.error
    if over_error is not None and over_error.kind == "context_limit":
        outcome = f"rejected: {over_error.message}"
    elif over_error is not None:
        outcome = f"failed without a context-limit rejection ({over_error.kind}): {over_error.message}"
    else:
        served = metrics.prompt_tokens(over_record)
        outcome = f"accepted ({served} prompt tokens served): truncated or limit not enforced"
    accepted = near_record.ok and bool(near_record.chunks)
    rejected = over_error is not None and over_error.kind == "context_limit"
    result = CapacityFile(
        limit_tokens=limit.tokens,
        limit_source=limit.source,
        target_tokens=target,
        accepted=accepted,
        prompt_tokens=served,
        count_error_tokens=None if served is None else served - near_planned,
        prefill_s=metrics.ttft_s(near_record),
        prefill_tokens_per_s=prefill_rate(near_record),
        near_limit_error=None
        if near_record.error is None
        else f"{near_record.error.kind}: {near_record.error.message}",
        over_limit_tokens=over_planned,
        over_limit_rejected=rejected,
        over_limit_outcome=outcome,
        request_ids=(near_record.request_id, over_record.request_id),
        holds=accepted and rejected,
    )
    result.save(run.path)
    return result


class CapacityCheck(Check[CapacityParams]):
    name = "capacity"
    params_type = CapacityParams
    claim = True
    fresh_only = True
    needs_limit = True

    def label(self, labels: Mapping[str, str]) -> str:
        return f"capacity {CapacityLabels.parse(labels).prompt or ''}".strip()

    def stage(self, labels: Mapping[str, str]) -> str | None:
        """The near-limit prompt; the one over the limit is refused by design."""
        return "capacity" if CapacityLabels.parse(labels).prompt == NEAR_LIMIT else None

    def request_count(self, params: CapacityParams) -> int:
        return 2  # one prompt near the limit, one over it

    def longest_prompt(self, params: CapacityParams, limit_tokens: int) -> int | None:
        return limit_tokens

    def announce(self, params: CapacityParams, ctx: RunContext) -> str | None:
        return f"claim 1: capacity near the {ctx.stated}-token limit, and one prompt over it"

    async def run(self, ctx: RunContext, params: CapacityParams) -> None:
        await run_capacity(ctx.client, ctx.pool, ctx.require_limit(self.name), params, ctx.run, ctx.scope)
        ctx.advance()
        ctx.advance()

    columns = CAPACITY_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return capacity_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return capacity_cells(results, run)

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)

    def glance(self, run: RunDir, cells: Mapping[str, Cell]) -> list[Glance]:
        return glance_lines(run, cells)

    def judge(self, run: RunDir, random_weights: bool) -> Judgement:
        return judgement_of(run)


CAPACITY = CapacityCheck()
