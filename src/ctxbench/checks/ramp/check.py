"""Claim 3, the conversation ramp: a chat that grows toward a million tokens, alone and beside others.

Each user holds a real multi-turn chat. Turn 1 plants a hidden fact in a fresh document; every turn
appends fresh document text (unique to that user and turn) so the whole context follows the
schedule, and asks for the fact again plus a short summary (long enough to measure decode). The fact is
the retrieval task's (`task`: the single literal fact, or multi_key with distractors of the same form, or
non_literal, whose question shares no word with it; text/tasks.py plants and scores them). The
assistant's replies stay in the history. The ramp runs with 1 user, then with U users, each
growing its own conversation, started `stagger_s` apart so one user's prefill overlaps another's
decode; the stall figure measures what that does to the user who is decoding.

This check reuses its own earlier context on purpose (that is what a conversation is): each turn's
`intended_cached_tokens` is its history as the server holds it (the previous prompt and the reply it
generated), so a cache audit can tell intended reuse from a leak.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...client.chat import ChatClient
from ...measure import decode_stall, metrics
from ...records import CacheIntent, RequestRecord
from ...render.cell import Cell, Glance
from ...render.figure_layout import PageRun
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...text.haystack import HaystackError, UnitPool, build_planted, lead_tokens, request_seed
from ...text.tasks import Knobs, Planted, task_named
from ..base import Check, Judgement, RunContext, StageLoad
from .cell import CLAIM_3_COLUMNS, glance_lines, judgement_of, ramp_cells
from .figures import figures, report_figures
from .labels import RampLabels, user_of
from .params import RampParams
from .section import console_lines, ramp_section
from .table import RAMP_TABLE, RampRow, append_rows, record_row

FOLLOW_UP = "Then, in a few sentences, summarize the newest section of the archive."


NEEDLE_DEPTH = 0.5  # where turn 1 plants the fact, in its document


def sampling(params: RampParams) -> dict[str, object]:
    """Greedy; with `ignore_eos` every reply writes max_tokens, so decode rates compare."""
    return {"temperature": 0.0, **({"ignore_eos": True} if params.ignore_eos else {})}


def ramp_schedule(params: RampParams) -> list[int]:
    """Context tokens per turn: geometric (constant ratio) or linear from start to end, inclusive (RampParams
    has checked that end is at least start)."""
    if params.turns == 1:
        return [params.end]
    steps = range(params.turns)
    if params.schedule == "linear":
        step = (params.end - params.start) / (params.turns - 1)
        return [round(params.start + i * step) for i in steps]
    ratio = (params.end / params.start) ** (1 / (params.turns - 1))
    return [round(params.start * ratio**i) for i in steps]


@dataclass(frozen=True)
class Turn:
    """One user's turn: what was asked, what came back, whether the fact was recalled."""

    users: int
    user: int
    turn: int
    target_tokens: int
    intended_cached_tokens: int
    record: RequestRecord | None
    recall: bool | None
    error: str | None


def recall_k_of_n(turns: Sequence[Turn]) -> tuple[int, int]:
    """(turns whose reply held the fact, turns answered); failed turns are not scored."""
    scored = [t.recall for t in turns if t.recall is not None]
    return sum(scored), len(scored)


def _fixed(planted: Planted) -> Callable[[random.Random], Planted]:
    """A plan that draws nothing from the prompt's seed: the user's fact was drawn once, from its own."""
    return lambda _: planted


async def _user(
    client: ChatClient,
    pool: UnitPool,
    params: RampParams,
    users: int,
    user: int,
    scope: tuple[str, ...],
    run: RunDir,
    on_turn: Callable[[Turn], None] | None,
) -> list[Turn]:
    await asyncio.sleep(user * params.stagger_s)
    rng = random.Random(request_seed(*scope, "ramp-needle", users, user))
    planted = task_named(params.task).plant(rng, (NEEDLE_DEPTH,), Knobs(distractors=params.distractors))
    asked = Planted(params.task, (), planted.questions, planted.avoid)  # later turns plant nothing
    (question,) = planted.questions
    history: list[dict[str, str]] = []
    history_tokens = 0
    lead = lead_tokens(pool.counter)
    turns: list[Turn] = []
    for number, target in enumerate(ramp_schedule(params), start=1):
        seed = request_seed(*scope, "ramp", users, user, number)
        try:
            # Counting a long history is CPU work: done in a thread, so the event loop keeps reading the
            # other users' streams and their chunks are stamped when they arrive, not in a late burst.
            plan = _fixed(planted if number == 1 else asked)
            (haystack,) = await asyncio.to_thread(
                build_planted, pool, target, seed, plan, history=history, suffix=f" {FOLLOW_UP}"
            )
        except HaystackError as exc:
            turn = Turn(users, user, number, target, history_tokens, None, None, f"not sent: {exc}")
        else:
            record = await client.chat(
                haystack.messages,
                max_tokens=params.max_tokens,
                request_id=run.request_id(f"ramp-u{users}-user{user}-turn{number}"),
                labels=RampLabels(
                    users=users,
                    user=user,
                    turn=number,
                    target_tokens=target,
                    planned_tokens=haystack.planned_tokens,
                    intended_cached_tokens=history_tokens,
                    task=None if params.task == "single" else params.task,
                    **RampLabels.answer(question),
                ).written(),
                extra_body=sampling(params),
                conversation=f"ramp-u{users}-user{user}",
                cache=(
                    CacheIntent.reusing(
                        "history",
                        lead,
                        max(lead, history_tokens),
                        f"this user's turns 1-{number - 1} and their replies",
                    )
                    if history_tokens
                    else CacheIntent.fresh(lead, "a conversation's first turn")
                ),
            )
            run.append(record)
            error = None if record.error is None else f"{record.error.kind}: {record.error.message}"
            turn = Turn(
                users,
                user,
                number,
                target,
                history_tokens,
                record,
                None if error else question.score(record.text),
                error,
            )
            if record.ok:
                # the next turn is counted from this prompt on, at the server's own count of it
                served = metrics.prompt_tokens(record)
                await asyncio.to_thread(
                    pool.counter.remember, haystack.messages, served or haystack.planned_tokens
                )
                history = [*haystack.messages, {"role": "assistant", "content": record.text}]
                # the server holds the previous prompt and the reply it generated: both may come back cached
                reply = metrics.output_tokens(record)
                history_tokens = (metrics.prompt_tokens(record) or haystack.planned_tokens) + (
                    reply.tokens if reply is not None else 0
                )
        turns.append(turn)
        if on_turn is not None:
            on_turn(turn)
        if turn.error is not None and params.on_failure == "stop":
            break
    return turns


def turn_line(turn: Turn) -> str:
    """A turn as it ends, for the console: who, which turn, how long, and recall or the failure."""
    said = f"FAILED {turn.error}" if turn.error else f"recall={'yes' if turn.recall else 'no'}"
    return f"users={turn.users} user={turn.user} turn={turn.turn} target={turn.target_tokens} {said}"


async def run_ramp(
    client: ChatClient,
    pool: UnitPool,
    params: RampParams,
    run: RunDir,
    scope: tuple[str, ...],
    *,
    deployment: str,
    table: Path,
    on_turn: Callable[[Turn], None] | None = None,
    skip_completed: bool = True,
) -> list[Turn]:
    """Run the ramp for each users setting in turn; append its rows to `table` (ramp1m.csv) when it ends.
    A setting that finished on an earlier attempt of `run` is skipped unless `skip_completed` is False."""
    everything: list[Turn] = []
    done = run.completed_units() if skip_completed else set()
    for users in params.users:
        if f"ramp-u{users}" in done:
            continue  # finished on an earlier attempt of this run: its rows are in the table already
        turns = [
            t
            for per_user in await asyncio.gather(
                *(_user(client, pool, params, users, user, scope, run, on_turn) for user in range(users))
            )
            for t in per_user
        ]
        append_rows(table, ramp_rows(turns, deployment=deployment, run=run))
        run.mark_completed(f"ramp-u{users}")
        everything += turns
    return everything


def ramp_rows(turns: Sequence[Turn], *, deployment: str, run: RunDir) -> list[RampRow]:
    """One ramp1m.csv row per turn, stall figures included."""
    stalls: dict[str, decode_stall.Stall | None] = {}
    for users in {t.users for t in turns}:
        stalls.update(
            decode_stall.user_stalls(
                [t.record for t in turns if t.users == users and t.record is not None], user_of
            )
        )
    source = str(Path("runs") / run.run_id / run.requests_path.name)
    rows = []
    for turn in turns:
        if turn.record is not None:
            rows.append(
                record_row(
                    turn.record,
                    deployment=deployment,
                    run_id=run.run_id,
                    source_file=source,
                    stall=stalls.get(turn.record.request_id),
                    recall=turn.recall,
                    error=turn.error,
                )
            )
            continue
        rows.append(
            RampRow(
                deployment=deployment,
                users=str(turn.users),
                user=str(turn.user),
                turn=str(turn.turn),
                target_tokens=str(turn.target_tokens),
                intended_cached_tokens=str(turn.intended_cached_tokens),
                error=turn.error or "",
                run_id=run.run_id,
                source_file=source,
            )
        )
    return rows


class RampCheck(Check[RampParams]):
    name = "ramp"
    params_type = RampParams
    claim = True
    needs_limit = False

    def stage(self, labels: Mapping[str, str]) -> str | None:
        """A users setting, every turn."""
        return f"ramp-u{RampLabels.parse(labels).users}"

    def conversation(self, labels: Mapping[str, str]) -> str | None:
        user = RampLabels.parse(labels).user  # a user's turns are one conversation
        return None if user is None else str(user)

    def stage_load(self, parameters: Mapping[str, Any], records: Sequence[RequestRecord]) -> StageLoad:
        # a users setting: that many conversations at once, each `turns` long
        return StageLoad(users=RampLabels.of(records[0]).users or 1, turns=int(parameters.get("turns") or 1))

    def request_count(self, params: RampParams) -> int:
        return params.turns * sum(params.users)

    def longest_prompt(self, params: RampParams, limit_tokens: int) -> int | None:
        return params.end

    def pending(self, params: RampParams, done: set[str]) -> bool:
        return True  # each users setting is a unit of its own, skipped in `run_ramp`

    def announce(self, params: RampParams, ctx: RunContext) -> str | None:
        return (
            f"claim 3: conversations growing {params.start} -> {params.end} "
            f"tokens in {params.turns} turns, with {list(params.users)} users"
        )

    async def run(self, ctx: RunContext, params: RampParams) -> None:
        def done(turn: Turn) -> None:
            ctx.say(turn_line(turn))
            ctx.advance()

        await run_ramp(
            ctx.client,
            ctx.pool,
            params,
            ctx.run,
            ctx.scope,
            deployment=ctx.deployment,
            table=ctx.results / RAMP_TABLE,
            on_turn=done,
            skip_completed=not ctx.force,
        )

    def label(self, labels: Mapping[str, str]) -> str:
        own = RampLabels.parse(labels)
        return f"ramp u{own.users} user {own.user} turn {own.turn}"

    # its reporting, from this folder: the run report's section, the evidence cells and columns, its part in
    # the run's status, its lines at a glance, the console lines and the figures
    columns = CLAIM_3_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return ramp_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return ramp_cells(results, run, price, list(run.records()))

    def judge(self, run: RunDir, random_weights: bool) -> Judgement:
        return judgement_of(run)

    def glance(self, run: RunDir, cells: Mapping[str, Cell]) -> list[Glance]:
        return glance_lines(run, cells, list(run.records()))

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)

    def figures(self, results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
        return figures(results, runs)

    def report_figures(self, results: Path, runs: Sequence[PageRun]) -> list[tuple[str, str, bytes]]:
        return report_figures(results, runs)


RAMP = RampCheck()
