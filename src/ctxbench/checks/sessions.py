"""Agent sessions: do many growing conversations, with real idle gaps between their turns, keep their context
in the cache, and at how many sessions does that stop?

At each level of `sessions` (swept upward), that many sessions run at once, staggered. A session begins with
the level's shared system prompt (fresh for the level) and each turn adds `turn_tokens` of fresh text (tool
output, user text) to everything before it, the server's own replies included; after each reply it is idle
for a gap (fixed or exponential, `time_scale` compressing it) before its next turn. A returning turn's cached
tokens against the whole previous context (prompt and reply, as the server counted them) say whether the
session was kept through the gap; what was not is prefilled again (its tokens and TTFT are the re-prefill).
A level holds while its returning turns find at least `hit_threshold` of their context cached; the first
level that does not is the cache cliff, set beside the planner's forecast (`plan.sessions_forecast`) in the
report. Each level is a unit of its own: a resumed run keeps the levels that finished and sends the rest.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from .. import metrics
from ..params import SessionsParams
from ..records import CacheIntent, RequestRecord
from ..sessions_file import SessionsFile, SessionsLevel, SessionTurn, level_summary
from ..text.haystack import (
    SEPARATOR,
    build_haystack,
    exact_body,
    lead_tokens,
    request_seed,
    turn_overhead_tokens,
)
from .base import Check, RunContext

UNIT = "sessions"
QUESTION = "Continue the task: given the newest output above, what is the next step, and why?"


def unit_of(level: int) -> str:
    return f"sessions-s{level}"


@dataclass(frozen=True)
class Level:
    """One level's shared parts: its system prompt and what a turn may find cached."""

    sessions: int
    system: dict[str, str]
    lead: int  # the template's opening every prompt shares
    shared: int  # the template and the system prompt: what a session's first turn may find cached
    stagger_s: float


def system_prompt(ctx: RunContext, params: SessionsParams, level: int) -> dict[str, str]:
    """A system prompt of about `system_tokens`, fresh for this level (and attempt): it opens with the level's
    own seed in letters, so no two levels' prompts share more than the template."""
    rng = random.Random(request_seed(*ctx.scope, UNIT, level, "system"))
    letters = "".join(rng.choice("abcdefghijklmnop") for _ in range(12))
    opening = f"Agent {letters}: plan the next step from what the user sends."
    budget = max(1, params.system_tokens - ctx.counter.count_many([opening])[0])
    body, _ = exact_body(ctx.pool, budget, rng)
    return {"role": "system", "content": SEPARATOR.join([opening, *body])}


def gap_of(params: SessionsParams, rng: random.Random) -> float:
    """The idle seconds before a session's next turn, compressed by `time_scale` (the report says so)."""
    mean = params.gap_s * params.time_scale
    return rng.expovariate(1.0 / mean) if params.gap == "exponential" and mean > 0 else mean


async def run_session(
    ctx: RunContext, params: SessionsParams, level: Level, number: int
) -> list[SessionTurn]:
    """One session's turns, each sent once its gap has passed; it ends at `turns`, before a turn would pass
    `context`, or at a failed turn (recorded)."""
    rng = random.Random(request_seed(*ctx.scope, UNIT, level.sessions, number, "turns"))
    name = f"{unit_of(level.sessions)}-{number}"
    extra: dict[str, object] = {"temperature": 0.0, "ignore_eos": True}
    if params.cache_salt:
        extra["cache_salt"] = "-".join(map(str, (*ctx.scope, name)))
    headers = (
        {params.session_header: "-".join(map(str, (*ctx.scope, name)))} if params.session_header else None
    )
    history: list[dict[str, str]] = [level.system]
    turns: list[SessionTurn] = []
    due = time.perf_counter() + number * level.stagger_s
    reusable: int | None = None
    ended: float | None = None  # when the previous reply ended
    for turn in range(1, params.turns + 1):
        seed = request_seed(*ctx.scope, UNIT, level.sessions, number, turn)
        new = rng.randint(params.turn_tokens, params.turn_tokens_max or params.turn_tokens)
        floor = await asyncio.to_thread(turn_overhead_tokens, ctx.pool, seed, QUESTION, history)
        if params.context is not None and floor + new > params.context:
            break
        haystack = await asyncio.to_thread(
            build_haystack, ctx.pool, floor + new, seed, question=QUESTION, history=history
        )
        # the prompt was built during the gap; a timer may wake a millisecond early (uvloop): never shorter
        while (left := due - time.perf_counter()) > 0:
            await asyncio.sleep(left)
        if reusable is None:
            intent = CacheIntent.reusing(
                "shared_prefix", level.lead, level.shared, "the level's system prompt"
            )
        else:
            allowed = reusable + params.max_tokens  # the reply as re-read may count a few tokens more
            intent = CacheIntent.reusing("history", level.lead, allowed, "the session's previous context")
        gap = None if ended is None else time.perf_counter() - ended
        labels = {
            "check": UNIT,
            "sessions": str(level.sessions),
            "session": str(number),
            "turn": str(turn),
            "planned_tokens": str(haystack.planned_tokens),
            "intended_cached_tokens": str(reusable or 0),
        }
        if gap is not None:
            labels["gap_s"] = f"{gap:.3f}"
        record = await ctx.client.chat(
            haystack.messages,
            max_tokens=params.max_tokens,
            request_id=ctx.run.request_id(f"{name}-t{turn}"),
            labels=labels,
            extra_body=extra,
            conversation=name,
            cache=intent,
            headers=headers,
        )
        ctx.run.append(record)
        ctx.advance()
        turns.append(turn_of(record, level.sessions, number, turn, gap, reusable))
        if not record.ok:
            break
        ended = time.perf_counter()
        reply = metrics.output_tokens(record)
        reusable = (metrics.prompt_tokens(record) or 0) + (reply.tokens if reply else 0)
        history = [*haystack.messages, {"role": "assistant", "content": record.text}]
        due = ended + gap_of(params, rng)
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


async def run_level(ctx: RunContext, params: SessionsParams, sessions: int) -> list[SessionTurn]:
    system = await asyncio.to_thread(system_prompt, ctx, params, sessions)
    stagger = (
        params.stagger_s if params.stagger_s is not None else params.gap_s * params.time_scale / sessions
    )
    level = Level(
        sessions=sessions,
        system=system,
        lead=lead_tokens(ctx.counter),
        shared=lead_tokens(ctx.counter, [system]),
        stagger_s=stagger,
    )
    per_session = await asyncio.gather(*(run_session(ctx, params, level, n) for n in range(sessions)))
    return [turn for turns in per_session for turn in turns]


async def run_sessions(ctx: RunContext, params: SessionsParams) -> SessionsFile:
    """Every level in turn, upward, each written to `sessions.json` and marked done as it ends; stops after
    the first level that does not hold (`stop_after_cliff`). Levels finished on an earlier attempt are kept
    as they were."""
    done = set() if ctx.force else ctx.run.completed_units()
    earlier = SessionsFile.load(ctx.run.path)
    levels: list[SessionsLevel] = [
        level for level in (earlier.levels if earlier else []) if unit_of(level.sessions) in done
    ]
    turns = [t for t in (earlier.turns if earlier else []) if unit_of(t.sessions) in done]
    for sessions in params.sessions:
        kept = next((level for level in levels if level.sessions == sessions), None)
        if kept is None:
            unit = unit_of(sessions)
            ctx.snapshot(unit, "before")
            measured = await run_level(ctx, params, sessions)
            ctx.snapshot(unit, "after")
            kept = level_summary(sessions, measured, params, ctx.run.attempt)
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
        """A level, every turn of its sessions."""
        return unit_of(int(labels["sessions"]))

    def request_count(self, params: SessionsParams) -> int:
        return params.request_count()

    def longest_prompt(self, params: SessionsParams, limit_tokens: int) -> int | None:
        return params.longest_prompt()

    def pending(self, params: SessionsParams, done: set[str]) -> bool:
        return True  # each level is a unit of its own, skipped in `run_sessions`

    def announce(self, params: SessionsParams, ctx: RunContext) -> str | None:
        scaled = f" (x{params.time_scale} time scale)" if params.time_scale != 1 else ""
        return (
            f"agent sessions: {','.join(map(str, params.sessions))} at once, up to {params.turns} turns of "
            f"{params.turn_tokens} new tokens over a {params.system_tokens}-token system prompt, "
            f"{params.gap} gaps of {params.gap_s:g} s{scaled}"
        )

    async def run(self, ctx: RunContext, params: SessionsParams) -> None:
        await run_sessions(ctx, params)


SESSIONS = SessionsCheck()
