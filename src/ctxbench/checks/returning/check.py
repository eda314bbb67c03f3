"""Returning users: does a conversation that comes back after other users' traffic find its context?

Each of `conversations` chats is built (a fresh document of `context` tokens, answered) and asked again at
once (the immediate return: its history should come from the cache). Then `filler_requests` fresh prompts
of other users pass through the server, pushing whatever the engine keeps out of its slots or KV blocks.
Then each conversation returns with one more question, and a fresh prompt of the same length is prefilled
for comparison. A return whose history came back from the cache reports it in `usage` (cached tokens); its
TTFT beside the immediate return's (kept close at hand) and the fresh prefill's (recomputed) says how far
it had to go. The planner's forecast (`forecast.py`) is set beside the measurement in the report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from ...client.chat import ChatClient
from ...measure import metrics
from ...records import CacheIntent, RequestRecord
from ...render.cell import Cell
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...text.haystack import UnitPool, build_haystack, lead_tokens, request_seed, turn_overhead_tokens
from ..base import Check, RunContext
from .cell import RETURNING_COLUMNS, returning_cells
from .file import Conversation, ReturningFile, Verdict
from .labels import IN_CONVERSATION, ReturningLabels
from .params import ReturningParams
from .section import console_lines, returning_section

UNIT = "returning"
QUESTION = "In two sentences, what does the newest part of this archive say?"
Phase = Literal["build", "immediate", "filler", "return", "fresh"]


def verdict_of(cached: int | None, history: int, ok: bool) -> Verdict:
    """At least 90% of the history reported cached: cached; under 10%: recomputed; else partly cached. An
    engine that reports no cached tokens at all (vLLM without `--enable-prompt-tokens-details`) leaves only
    the TTFTs to read: not reported."""
    if not ok:
        return "failed"
    if cached is None:
        return "not reported"
    share = cached / history if history else 0.0
    return "cached" if share >= 0.9 else "recomputed" if share < 0.1 else "partly cached"


async def run_returning(
    client: ChatClient,
    pool: UnitPool,
    params: ReturningParams,
    run: RunDir,
    scope: tuple[str, ...],
    on_request: Callable[[RequestRecord], None] | None = None,
) -> ReturningFile:
    """Build, fill, return, compare; one request at a time. Returns (and writes) `returning.json`."""
    extra = {"temperature": 0.0, "ignore_eos": True}
    lead = lead_tokens(pool.counter)

    def intent(phase: Phase, intended: int) -> CacheIntent:
        if not intended:
            return CacheIntent.fresh(lead, f"a fresh {phase} prompt")
        # the server may hold the reply too: the history's prompt plus at most `max_tokens` generated
        allowed = intended + params.max_tokens
        if phase == "return":
            return CacheIntent.reusing("returning", lead, allowed, "the conversation's history, returning")
        return CacheIntent.reusing("history", lead, allowed, "the conversation's history, asked at once")

    async def send(
        phase: Phase, number: int, history: list[dict[str, str]], intended: int, target: int | None = None
    ) -> tuple[RequestRecord, tuple[dict[str, str], ...]]:
        seed = request_seed(*scope, "returning", phase, number)
        if (
            target is None and history
        ):  # a conversation's turn: its history, then `follow_up_tokens` of new text
            floor = await asyncio.to_thread(turn_overhead_tokens, pool, seed, QUESTION, history)
            target = floor + params.follow_up_tokens
        elif target is None:
            target = params.context if phase == "build" else params.filler_tokens or params.context
        haystack = await asyncio.to_thread(
            build_haystack, pool, target, seed, question=QUESTION, history=history
        )
        record = await client.chat(
            haystack.messages,
            max_tokens=params.max_tokens,
            request_id=run.request_id(f"returning-{phase}-{number}"),
            labels=ReturningLabels(
                phase=phase,
                conversation=number,
                planned_tokens=haystack.planned_tokens,
                intended_cached_tokens=intended,
            ).written(),
            extra_body=extra,
            conversation=f"returning-{number}" if phase in IN_CONVERSATION else None,
            cache=intent(phase, intended),
        )
        run.append(record)
        if on_request is not None:
            on_request(record)
        return record, haystack.messages

    def history_after(messages: tuple[dict[str, str], ...], reply: RequestRecord) -> list[dict[str, str]]:
        return [*messages, {"role": "assistant", "content": reply.text}]

    built: list[tuple[RequestRecord, RequestRecord, list[dict[str, str]]]] = []
    for number in range(params.conversations):
        build, messages = await send("build", number, [], 0)
        immediate, messages = await send("immediate", number, history_after(messages, build), _prompt(build))
        built.append((build, immediate, history_after(messages, immediate)))
    for number in range(params.filler_requests):
        await send("filler", number, [], 0)
    conversations = []
    for number, (build, immediate, history) in enumerate(built):
        back, _ = await send("return", number, history, _prompt(immediate))
        # a fresh prompt exactly as long as the return: nothing of it was ever sent before
        fresh, _ = await send("fresh", number, [], 0, target=back.planned_tokens)
        conversations.append(
            Conversation(
                conversation=number,
                history_tokens=_prompt(immediate),
                return_tokens=metrics.prompt_tokens(back),
                cached_on_return=metrics.cached_tokens(back),
                ttft_build_s=metrics.ttft_s(build),
                ttft_immediate_s=metrics.ttft_s(immediate),
                ttft_return_s=metrics.ttft_s(back),
                ttft_fresh_s=metrics.ttft_s(fresh),
                verdict=verdict_of(metrics.cached_tokens(back), _prompt(immediate), back.ok and immediate.ok),
            )
        )
    summary = returning_summary(conversations, params, run.attempt)
    summary.save(run.path)
    return summary


def _prompt(record: RequestRecord) -> int:
    """The prompt tokens the server counted (0 for a request that failed before it said)."""
    return metrics.prompt_tokens(record) or 0


def returning_summary(
    conversations: list[Conversation], params: ReturningParams, attempt: int
) -> ReturningFile:
    def median(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return metrics.percentile(present, 50)

    verdicts: dict[str, int] = {}
    for c in conversations:
        verdicts[c.verdict] = verdicts.get(c.verdict, 0) + 1
    return ReturningFile(
        spec=params.model_dump(mode="json"),
        conversations=conversations,
        verdicts=verdicts,
        ttft_immediate_s=median([c.ttft_immediate_s for c in conversations]),
        ttft_return_s=median([c.ttft_return_s for c in conversations]),
        ttft_fresh_s=median([c.ttft_fresh_s for c in conversations]),
        attempt=attempt,
    )


class ReturningCheck(Check[ReturningParams]):
    name = UNIT
    params_type = ReturningParams
    needs_limit = False

    def conversation(self, labels: Mapping[str, str]) -> str | None:
        # built, asked again at once, returning: one conversation; the fillers and fresh prompts are none
        own = ReturningLabels.parse(labels)
        return (
            str(own.conversation) if own.phase in IN_CONVERSATION and own.conversation is not None else None
        )

    def request_count(self, params: ReturningParams) -> int:
        return params.request_count()

    def longest_prompt(self, params: ReturningParams, limit_tokens: int) -> int | None:
        return params.context

    def announce(self, params: ReturningParams, ctx: RunContext) -> str | None:
        return (
            f"returning users: {params.conversations} conversations of {params.context} "
            f"tokens, {params.filler_requests} other prompts between, then each returns"
        )

    async def run(self, ctx: RunContext, params: ReturningParams) -> None:
        await run_returning(ctx.client, ctx.pool, params, ctx.run, ctx.scope, on_request=ctx.advance)

    columns = RETURNING_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return returning_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return returning_cells(results, run)

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)


RETURNING = ReturningCheck()
