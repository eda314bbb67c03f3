"""Agent sessions: do many growing conversations, with real idle gaps between their turns, keep their context
in the cache, and at how many sessions does that stop?

At each level of `sessions` (swept upward), that many sessions run at once, staggered. A session begins with
the level's shared system prompt (fresh for the level) and each turn adds `turn_tokens` of fresh text (tool
output, user text) to everything before it, the server's own replies included; after each reply it is idle
for a gap (fixed or exponential, `time_scale` compressing it) before its next turn. A returning turn's cached
tokens against the whole previous context (prompt and reply, as the server counted them) say whether the
session was kept through the gap; what was not is prefilled again (its tokens and TTFT are the re-prefill).
A level holds while its returning turns find at least `hit_threshold` of their context cached; the first
level that does not is the cache cliff, set beside the planner's forecast (`forecast.py`) in the
report. Each level is a unit of its own: a resumed run keeps the levels that finished and sends the rest.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...measure import metrics
from ...records import CacheIntent, RequestRecord
from ...render.cell import Cell
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...text.haystack import (
    SEPARATOR,
    build_haystack,
    exact_body,
    lead_tokens,
    request_seed,
    turn_overhead_tokens,
)
from ..base import Check, LocalFile, RunContext, StageLoad
from .cell import SESSIONS_COLUMNS, console_lines, sessions_cells
from .file import SessionsFile, SessionsLevel, SessionTurn, level_summary
from .labels import SessionsLabels
from .params import SessionsParams
from .recorded import RecordedTurn, read_session_trace, sessions_of_mlperf_agentic, sessions_of_mooncake
from .section import sessions_section

UNIT = "sessions"
QUESTION = "Continue the task: given the newest output above, what is the next step, and why?"


TRACE_UNIT = "sessions-trace"


def unit_of(level: int) -> str:
    return f"sessions-s{level}"


@dataclass(frozen=True)
class Plan:
    """One session to run: its system prompt (None: none), what its first turn may find cached, and its turns
    (new tokens, reply, when: seconds from the level's start or after the previous reply, not yet scaled)."""

    number: int
    name: str  # its id in request ids and the session header
    system: dict[str, str] | None
    shared: int  # tokens a first turn may find cached: the template's lead, with the system prompt
    turns: tuple[RecordedTurn, ...]


def system_prompt(ctx: RunContext, tokens: int, *key: object) -> dict[str, str]:
    """A system prompt of about `tokens`, fresh for `key` (a level, a trace's shared prefix) and the attempt:
    it opens with its own seed in letters, so no two share more than the template."""
    rng = random.Random(request_seed(*ctx.scope, UNIT, *key, "system"))
    letters = "".join(rng.choice("abcdefghijklmnop") for _ in range(12))
    opening = f"Agent {letters}: plan the next step from what the user sends."
    budget = max(1, tokens - ctx.counter.count_many([opening])[0])
    body, _ = exact_body(ctx.pool, budget, rng)
    return {"role": "system", "content": SEPARATOR.join([opening, *body])}


def level_plans(ctx: RunContext, params: SessionsParams, sessions: int) -> list[Plan]:
    """A level of `sessions` drawn from the parameters: one system prompt, starts staggered, seeded gaps."""
    system = system_prompt(ctx, params.system_tokens, sessions)
    shared = lead_tokens(ctx.counter, [system])
    stagger = params.stagger_s if params.stagger_s is not None else params.gap_s / sessions
    plans = []
    for number in range(sessions):
        rng = random.Random(request_seed(*ctx.scope, UNIT, sessions, number, "turns"))
        turns = []
        for turn in range(params.turns):
            new = rng.randint(params.turn_tokens, params.turn_tokens_max or params.turn_tokens)
            gap = None if turn == 0 else gap_of(params, rng)
            turns.append(RecordedTurn(new, params.max_tokens, number * stagger if turn == 0 else None, gap))
        plans.append(Plan(number, f"{unit_of(sessions)}-{number}", system, shared, tuple(turns)))
    return plans


def trace_plans(ctx: RunContext, params: SessionsParams) -> list[Plan]:
    """The recorded sessions of `trace`, a fresh system prompt for each shared prefix they name."""
    assert params.trace is not None
    if params.trace_format == "mooncake":
        recorded = sessions_of_mooncake(params.trace, params.block_tokens, params.max_sessions)
    elif params.trace_format == "mlperf-agentic":
        stagger = params.stagger_s or 0.0
        recorded = sessions_of_mlperf_agentic(params.trace, ctx.counter, stagger, params.max_sessions)
    else:
        recorded = read_session_trace(params.trace, params.max_sessions)
    prompts: dict[str, dict[str, str]] = {}
    plans = []
    for number, session in enumerate(recorded):
        system = None
        if session.shared_prefix is not None:
            key = session.shared_prefix
            if key not in prompts:  # built once: every session naming it shares the same text
                prompts[key] = system_prompt(ctx, session.shared_prefix_tokens, "trace", key)
            system = prompts[key]
        shared = lead_tokens(ctx.counter, [system] if system else [])
        plans.append(Plan(number, f"{TRACE_UNIT}-{number}", system, shared, session.turns))
    return plans


def gap_of(params: SessionsParams, rng: random.Random) -> float:
    """The idle seconds before a session's next turn, before `time_scale` (the report says so)."""
    return (
        rng.expovariate(1.0 / params.gap_s)
        if params.gap == "exponential" and params.gap_s > 0
        else params.gap_s
    )


class Clock:
    """The level's start: set once every session has built its first prompt, so that no first turn is late by
    its own building (a 1M-token prompt takes seconds to build)."""

    def __init__(self, sessions: int) -> None:
        self.waiting = sessions
        self.started = asyncio.Event()
        self.start = 0.0

    async def ready(self) -> float:
        self.waiting -= 1
        if self.waiting == 0:
            self.start = time.perf_counter()
            self.started.set()
        await self.started.wait()
        return self.start


async def run_session(
    ctx: RunContext, params: SessionsParams, level: int, plan: Plan, clock: Clock, traced: bool
) -> list[SessionTurn]:
    """One session's turns, each due at its time (never before the previous reply ended) and sent then, its
    due time recorded (`enqueued_ns`: a prompt built past it shows as the client's lateness); it ends after
    its turns, before a turn would pass `context`, or at a failed turn (recorded)."""
    scale = params.time_scale
    extra: dict[str, object] = {"temperature": 0.0, "ignore_eos": True}
    if params.cache_salt:
        extra["cache_salt"] = "-".join(map(str, (*ctx.scope, plan.name)))
    session_id = "-".join(map(str, (*ctx.scope, plan.name)))
    headers = {params.session_header: session_id} if params.session_header else None
    lead = lead_tokens(ctx.counter)
    history: list[dict[str, str]] = [plan.system] if plan.system else []
    turns: list[SessionTurn] = []
    reusable: int | None = None
    ended: float | None = None  # when the previous reply ended
    start: float | None = None
    for number, step in enumerate(plan.turns, start=1):
        seed = request_seed(*ctx.scope, UNIT, level, plan.name, number)
        floor = await asyncio.to_thread(turn_overhead_tokens, ctx.pool, seed, QUESTION, history)
        # a recorded prompt length where the trace gives one, with at least one token of new text
        target = max(floor + 1, step.prompt_tokens) if step.prompt_tokens else floor + step.new_tokens
        haystack = None
        if params.context is None or target <= params.context:
            haystack = await asyncio.to_thread(
                build_haystack, ctx.pool, target, seed, question=QUESTION, history=history
            )
        if start is None:
            start = await clock.ready()
        if haystack is None:
            break
        due = max(
            start + step.at_s * scale if step.at_s is not None else 0.0,
            (ended or 0.0) + (step.gap_s or 0.0) * scale,
        )
        # the prompt was built during the gap; a timer may wake a millisecond early (uvloop): never shorter
        while (left := due - time.perf_counter()) > 0:
            await asyncio.sleep(left)
        if reusable is None:
            intent = (
                CacheIntent.reusing("shared_prefix", lead, plan.shared, "the session's shared system prompt")
                if plan.system
                else CacheIntent.fresh(lead, "a session's first turn")
            )
        else:
            allowed = reusable + step.output_tokens  # the reply as re-read may count a few tokens more
            intent = CacheIntent.reusing("history", lead, allowed, "the session's previous context")
        gap = None if ended is None else time.perf_counter() - ended
        labels = SessionsLabels(
            sessions=level,
            session=plan.number,
            turn=number,
            planned_tokens=haystack.planned_tokens,
            intended_cached_tokens=reusable or 0,
            trace=traced,
            gap_s=gap,
        ).written()
        record = await ctx.client.chat(
            haystack.messages,
            max_tokens=step.output_tokens,
            enqueued_ns=int(due * 1e9),
            request_id=ctx.run.request_id(f"{plan.name}-t{number}"),
            labels=labels,
            extra_body=extra,
            conversation=plan.name,
            cache=intent,
            headers=headers,
        )
        ctx.run.append(record)
        ctx.advance()
        turns.append(turn_of(record, level, plan.number, number, gap, reusable))
        if not record.ok:
            break
        ended = time.perf_counter()
        reply = metrics.output_tokens(record)
        reusable = (metrics.prompt_tokens(record) or 0) + (reply.tokens if reply else 0)
        history = [*haystack.messages, {"role": "assistant", "content": record.text}]
    return turns


def turn_of(
    record: RequestRecord, level: int, session: int, turn: int, gap: float | None, reusable: int | None
) -> SessionTurn:
    prompt, cached = metrics.prompt_tokens(record), metrics.cached_tokens(record)
    return SessionTurn(
        sessions=level,
        session=session,
        turn=turn,
        request_id=record.request_id,
        ok=record.ok,
        gap_s=gap,
        prompt_tokens=prompt,
        reusable_tokens=reusable,
        cached_tokens=cached,
        reprefill_tokens=None if prompt is None or cached is None else prompt - cached,
        ttft_s=metrics.ttft_s(record),
    )


async def run_plans(
    ctx: RunContext, params: SessionsParams, plans: list[Plan], traced: bool = False
) -> list[SessionTurn]:
    clock, level = Clock(len(plans)), len(plans)
    runs = (run_session(ctx, params, level, plan, clock, traced) for plan in plans)
    return [turn for turns in await asyncio.gather(*runs) for turn in turns]


def unit_in(level: SessionsLevel) -> str:
    return level.unit or unit_of(level.sessions)  # files written before traces name no unit


async def run_sessions(ctx: RunContext, params: SessionsParams) -> SessionsFile:
    """Every level in turn, upward, each written to `sessions.json` and marked done as it ends; stops after
    the first level that does not hold (`stop_after_cliff`). A trace is one level, its sessions at their
    recorded times. Levels finished on an earlier attempt are kept as they were."""
    done = set() if ctx.force else ctx.run.completed_units()
    earlier = SessionsFile.load(ctx.run.path)
    levels = [level for level in (earlier.levels if earlier else []) if unit_in(level) in done]
    turns = [
        t for t in (earlier.turns if earlier else []) if any(level.sessions == t.sessions for level in levels)
    ]
    wanted = [None] if params.trace is not None else list(params.sessions)
    for sessions in wanted:
        unit = TRACE_UNIT if sessions is None else unit_of(sessions)
        kept = next((level for level in levels if unit_in(level) == unit), None)
        if kept is None:
            if sessions is None:
                plans = await asyncio.to_thread(trace_plans, ctx, params)
            else:
                plans = await asyncio.to_thread(level_plans, ctx, params, sessions)
            ctx.snapshot(unit, "before")
            measured = await run_plans(ctx, params, plans, traced=sessions is None)
            ctx.snapshot(unit, "after")
            kept = level_summary(len(plans), measured, params, ctx.run.attempt, unit)
            levels.append(kept)
            turns += measured
            SessionsFile.of(params, levels, turns).save(ctx.run.path)
            ctx.run.mark_completed(unit)
        if params.stop_after_cliff and kept.holds is False:
            break
    data = SessionsFile.of(params, levels, turns)
    data.save(ctx.run.path)
    return data


class SessionsCheck(Check[SessionsParams]):
    name = UNIT
    params_type = SessionsParams
    needs_limit = False

    def stage(self, labels: Mapping[str, str]) -> str | None:
        """A level, every turn of its sessions; a replayed trace, every turn."""
        own = SessionsLabels.parse(labels)
        return TRACE_UNIT if own.trace else unit_of(own.sessions or 1)

    def conversation(self, labels: Mapping[str, str]) -> str | None:
        session = SessionsLabels.parse(labels).session
        return None if session is None else str(session)

    def stage_load(self, parameters: Mapping[str, Any], records: Sequence[RequestRecord]) -> StageLoad:
        # a level's sessions share one system prompt, each session one of its users; idle between turns,
        # they seldom overlap, so neither a rate nor users: the export states the peak in flight measured
        sessions = SessionsLabels.of(records[0]).sessions or 1
        return StageLoad(
            prefix_tokens=int(parameters.get("system_tokens") or 0),
            prefix_users=sessions,
            turns=int(parameters.get("turns") or 1),
        )

    def request_count(self, params: SessionsParams) -> int:
        return params.request_count()

    def longest_prompt(self, params: SessionsParams, limit_tokens: int) -> int | None:
        return params.longest_prompt()

    def pending(self, params: SessionsParams, done: set[str]) -> bool:
        return True  # each level is a unit of its own, skipped in `run_sessions`

    def local_files(self, params: SessionsParams) -> list[LocalFile]:
        instead = (
            'Give the local path of recorded sessions (docs/campaigns.md, "Session traces"), or leave trace '
            "out to run the levels of `sessions`."
        )
        return [] if params.trace is None else [LocalFile("trace", params.trace, instead)]

    def announce(self, params: SessionsParams, ctx: RunContext) -> str | None:
        if params.trace is not None:
            scale = params.time_scale
            return f"agent sessions: replaying {params.trace} ({params.trace_format}) at x{scale:g} its times"
        scaled = f" (x{params.time_scale} time scale)" if params.time_scale != 1 else ""
        return (
            f"agent sessions: {','.join(map(str, params.sessions))} at once, up to {params.turns} turns of "
            f"{params.turn_tokens} new tokens over a {params.system_tokens}-token system prompt, "
            f"{params.gap} gaps of {params.gap_s:g} s{scaled}"
        )

    async def run(self, ctx: RunContext, params: SessionsParams) -> None:
        await run_sessions(ctx, params)

    columns = SESSIONS_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return sessions_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return sessions_cells(results, run)

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)


SESSIONS = SessionsCheck()
