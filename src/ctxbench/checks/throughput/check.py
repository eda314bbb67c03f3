"""Many users, short prompts: closed-loop users at several concurrency levels, then open-loop rates
(`open_loop.py`), for throughput, latency under load and cost.

At each level, U users each send requests back to back (the next as soon as the previous ends). Each
user's first `warmup_requests` are recorded with `warmup=1` and excluded from the numbers. Prompts are
fresh per request (prose or code from ctxbench's generators, token-exact) or read from the user's JSONL;
a shared prefix of N tokens (a system prompt every request carries) is an option, recorded. The engine's
`/metrics` is read before and after each level, for speculative-decoding acceptance. Each finished level
rewrites `throughput.json` and is a unit a resumed run skips.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...client.chat import ChatClient
from ...config.load_params import ThroughputParams
from ...measure import metrics
from ...measure.slo_search import judge, search
from ...measure.steady import steady_state
from ...records import RequestRecord
from ...render.cell import Cell
from ...render.figure_layout import PageRun
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ..base import Check, RunContext, StageLoad
from ..prompts import PromptMaker
from .cell import THROUGHPUT_COLUMNS, ask_cell, open_loop_cell, slo_cell, throughput_cells
from .closed_loop import Level, extra_body, run_user, users_in_processes
from .comparison import throughput_comparison
from .figures import figures
from .file import ThroughputFile
from .labels import OPEN, ThroughputLabels
from .rates import rate_summary, rate_unit, run_rate
from .recall_under_load import UNIT as ASK_UNIT
from .recall_under_load import ask_level, run_recall_under_load
from .section import console_lines, throughput_section


def level_unit(users: int, repeat: int = 0) -> str:
    return f"throughput-u{users}" + (f"-rep{repeat}" if repeat else "")


class _Levels:
    """One run of the check: runs a closed-loop level or an open-loop rate once (a unit a resumed run
    skips, its figures read back from `throughput.json`), rewriting the file after each."""

    def __init__(
        self,
        client: ChatClient,
        prompts: PromptMaker,
        params: ThroughputParams,
        run: RunDir,
        scope: tuple[str, ...],
        snapshot: Callable[[str, str], None],
        on_request: Callable[[RequestRecord], None] | None,
        skip_completed: bool,
    ) -> None:
        self.client, self.prompts, self.params, self.run, self.scope = client, prompts, params, run, scope
        self.snapshot, self.on_request = snapshot, on_request
        self.done = run.completed_units() if skip_completed else set()
        recorded = ThroughputFile.load(run.path)  # a resumed run's levels and rates, read back
        self.summary: dict[str, Any] = (
            recorded.model_dump(mode="json", exclude_unset=True) if recorded else {"levels": {}}
        )
        self.summary["spec"] = params.model_dump(mode="json")

    def save(self) -> None:
        """Write `throughput.json` as it stands (validated: a level without its figures is refused here)."""
        ThroughputFile.model_validate(self.summary).save(self.run.path)

    def _finish(self, unit: str) -> None:
        self.save()
        self.run.mark_completed(unit)
        # The search may ask for this level again (it starts at 1 user): it reads these figures back
        # instead of sending the same request ids and prompts to a cache that now holds them.
        self.done.add(unit)

    async def users(self, users: int, repeat: int = 0) -> Mapping[str, Any]:
        """A closed-loop level (`repeat` > 0: a search's repeat of it, fresh prompts, kept apart)."""
        unit = level_unit(users, repeat)
        store = self.summary["levels"] if not repeat else self.summary.setdefault("repeats", {})
        key = str(users) if not repeat else unit
        if unit in self.done and key in store:
            return store[key]
        params, run = self.params, self.run
        level = Level(self.client, self.prompts, params, run, self.scope, users, self.on_request, repeat)
        self.snapshot(unit, "before")
        began = time.perf_counter()

        async def another(first: int, more: int, budget_s: float) -> list[RequestRecord]:
            per_user = math.ceil(more / users)
            return await self._closed(
                dataclasses.replace(level, first=first, per_user=per_user, budget_s=budget_s)
            )

        def figures(records: Sequence[RequestRecord]) -> dict[str, Any]:
            return level_summary([r for r in records if not r.warmup], params, run.attempt)

        store[key] = await self._until_decided(began, await self._closed(level), figures, another)
        self.snapshot(unit, "after")
        self._finish(unit)
        return store[key]

    async def _closed(self, level: Level) -> list[RequestRecord]:
        """One round of a closed-loop level, on the client processes or Ray actors the params ask for."""
        if self.params.ray_actors > 0:
            from .ray import users_over_ray

            return await users_over_ray(level)
        if self.params.client_processes > 1 and level.users > 1:
            return await users_in_processes(level)
        started = time.perf_counter()
        per_user = await asyncio.gather(*(run_user(level, user, started) for user in range(level.users)))
        return [r for mine in per_user for r in mine]

    async def _until_decided(
        self,
        began: float,
        records: list[RequestRecord],
        figures_of: Callable[[Sequence[RequestRecord]], dict[str, Any]],
        another: Callable[[int, int, float], Awaitable[list[RequestRecord]]],
    ) -> dict[str, Any]:
        """A level's figures once the SLO decides them (met or broke), or its cap is reached (undetermined,
        and why it stopped): while undetermined, `another(first, more, budget_s)` runs a further round of
        `more` fresh requests numbered from `first`, aiming at the requests that would decide it
        (`Judgement.needed`), within `max_requests` and `max_s` for the level. Without an SLO: one round."""
        slo, figures, rounds = self.params.slo, figures_of(records), 1
        while slo is not None and (judged := judge(figures, slo)).verdict == "undetermined":
            spent = time.perf_counter() - began
            target = min(judged.needed(), slo.max_requests)
            if target <= figures["requests"] or spent >= slo.max_s:
                figures["stopped_by"] = (
                    f"max_requests = {slo.max_requests}"
                    if target <= figures["requests"]
                    else f"max_s = {slo.max_s:g} s"
                )
                break
            first = 1 + max(ThroughputLabels.of(r).index or 0 for r in records)
            records = [*records, *await another(first, target - figures["requests"], slo.max_s - spent)]
            rounds, figures = rounds + 1, figures_of(records)
        if slo is not None:
            figures["verdict"], figures["rounds"] = judge(figures, slo).verdict, rounds
        return figures

    async def rate(self, rate: float, repeat: int = 0) -> Mapping[str, Any]:
        """An open-loop rate (`repeat` > 0: a search's repeat of it)."""
        unit = rate_unit(rate, repeat)
        store = self.summary.setdefault("rates", {}) if not repeat else self.summary.setdefault("repeats", {})
        key = f"{rate:g}" if not repeat else unit
        if unit in self.done and key in store and "skipped" not in store[key]:
            return store[key]
        self.snapshot(unit, "before")
        began = time.perf_counter()
        params, client, prompts = self.params, self.client, self.prompts

        async def another(first: int, more: int, budget_s: float) -> list[RequestRecord]:
            count = max(1, min(more, math.ceil(budget_s * rate)))  # a rate's arrivals take count / rate s
            return await run_rate(
                client,
                prompts,
                params,
                self.run,
                self.scope,
                rate,
                extra,
                self.on_request,
                repeat,
                first,
                count,
            )

        def figures(records: Sequence[RequestRecord]) -> dict[str, Any]:
            return rate_summary(list(records), params, rate, self.run.attempt)

        extra = extra_body(params)
        records = await run_rate(
            client, prompts, params, self.run, self.scope, rate, extra, self.on_request, repeat
        )
        store[key] = await self._until_decided(began, records, figures, another)
        self.snapshot(unit, "after")
        self._finish(unit)
        return store[key]


async def run_throughput(
    client: ChatClient,
    prompts: PromptMaker,
    params: ThroughputParams,
    run: RunDir,
    scope: tuple[str, ...],
    *,
    snapshot: Callable[[str, str], None] = lambda unit, phase: None,
    on_request: Callable[[RequestRecord], None] | None = None,
    skip_completed: bool = True,
) -> dict[str, Any]:
    """Run every level, rate and search probe not finished yet; returns (and writes) `throughput.json`."""
    levels = _Levels(client, prompts, params, run, scope, snapshot, on_request, skip_completed)
    summary = levels.summary
    for users in params.levels:
        await levels.users(users)
    for rate in offered_rates(params, summary):
        saturated_at = summary.get("saturated_at")
        if rate_unit(rate) in levels.done:
            continue
        if saturated_at is not None and rate > saturated_at:
            reason = f"not offered: the server saturated at {saturated_at:g} requests/s"
            summary.setdefault("rates", {})[f"{rate:g}"] = {"skipped": reason}
            levels.save()
            continue
        line = await levels.rate(rate)
        if line["saturated"]:
            summary["saturated_at"] = rate
            levels.save()
    if params.search is not None:
        start = search_start(params, summary)
        if start is None:
            summary["search"] = {
                "skipped": "no closed-loop level answered, so there is no capacity to start from"
            }
        else:
            measure = (lambda u, k: levels.users(int(u), k)) if params.search == "users" else levels.rate
            summary["search"] = await search(params, start, measure)
        levels.save()
    asked_at = ask_level(params, summary) if params.ask is not None else None
    if params.ask is not None and asked_at is not None and ASK_UNIT not in levels.done:
        snapshot(ASK_UNIT, "before")
        summary["ask"] = await run_recall_under_load(
            client, prompts, prompts.prose, params, params.ask, run, scope, asked_at, on_request
        )
        snapshot(ASK_UNIT, "after")
        levels.save()
        run.mark_completed(ASK_UNIT)
    return summary


def best_capacity(summary: Mapping[str, Any]) -> float | None:
    """The best requests/s of this run's closed-loop levels."""
    measured = [line.get("requests_per_s") for line in summary["levels"].values()]
    return max((value for value in measured if value), default=None)


def search_start(params: ThroughputParams, summary: Mapping[str, Any]) -> float | None:
    """The search's first level: `search_from`, else (a rate) a quarter of the closed loop's capacity."""
    if params.search_from is not None:
        return params.search_from
    if params.search == "users":
        return 1.0
    capacity = best_capacity(summary)
    return None if capacity is None else float(f"{capacity / 4:.3g}")


def offered_rates(params: ThroughputParams, summary: dict[str, Any]) -> list[float]:
    """`rates`, or `rates_of_capacity` times the best requests/s of this run's closed-loop levels (written to
    the summary as `capacity_requests_per_s`; none measured: no rate is offered, and the summary says so)."""
    if not params.rates_of_capacity:
        return sorted(params.rates)
    capacity = best_capacity(summary)
    summary["capacity_requests_per_s"] = capacity
    if capacity is None:
        summary["rates_skipped"] = "no closed-loop level answered, so there is no capacity to scale"
        return []
    return sorted(float(f"{factor * capacity:.3g}") for factor in params.rates_of_capacity)


def level_summary(records: Sequence[RequestRecord], params: ThroughputParams, attempt: int) -> dict[str, Any]:
    figures = metrics.throughput(records, params.ttft_slo_s, params.tpot_slo_s)
    steady = steady_state(records)
    return {
        **dataclasses.asdict(figures),
        "steady": None if steady is None else dataclasses.asdict(steady),
        "attempt": attempt,
        "request_ids": [r.request_id for r in records],
    }


class ThroughputCheck(Check[ThroughputParams]):
    name = "throughput"
    params_type = ThroughputParams
    needs_limit = False

    def stage(self, labels: Mapping[str, str]) -> str | None:
        """A closed-loop level or an open-loop rate, and a search's repeat of either; warm-up left out; the
        questions and load of recall under load, a stage of their own."""
        own = ThroughputLabels.parse(labels)
        if own.ask:
            return f"{ASK_UNIT}-u{own.users}"
        if own.warmup:
            return None
        if own.mode == OPEN and own.rate is not None:
            return rate_unit(own.rate, own.repeat or 0)
        return level_unit(own.users or 0, own.repeat or 0)

    def stage_load(self, parameters: Mapping[str, Any], records: Sequence[RequestRecord]) -> StageLoad:
        # an open-loop rate, else a closed-loop level's users, who share the prefix; a user's JSONL is
        # sampled data, ctxbench's prose and code fresh text
        labels = ThroughputLabels.of(records[0])
        users = labels.users or 1
        return StageLoad(
            rate_qps=labels.rate if labels.mode == OPEN else None,
            users=None if labels.mode == OPEN else users,
            prefix_tokens=int(parameters.get("shared_prefix_tokens") or 0),
            prefix_users=users,
            sampled=parameters.get("source") not in ("prose", "code"),
        )

    def request_count(self, params: ThroughputParams) -> int:
        return params.request_count()

    def longest_prompt(self, params: ThroughputParams, limit_tokens: int) -> int | None:
        return params.prompt_tokens

    def pending(self, params: ThroughputParams, done: set[str]) -> bool:
        return True  # each level, rate and search probe is a unit of its own, skipped in `_Levels`

    def announce(self, params: ThroughputParams, ctx: RunContext) -> str | None:
        return (
            f"many users, short prompts: {list(params.levels)} users, {params.rates_text()}, "
            f"{params.prompt_tokens} tokens in, {params.output_tokens} out ({params.source})"
        )

    async def run(self, ctx: RunContext, params: ThroughputParams) -> None:
        prompts = PromptMaker(params, ctx.pool, ctx.counter, ctx.scope)
        await run_throughput(
            ctx.client,
            prompts,
            params,
            ctx.run,
            ctx.scope,
            snapshot=ctx.snapshot,
            on_request=ctx.advance,
            skip_completed=not ctx.force,
        )

    # its reporting, from this folder: the run report's section, the evidence cells and columns, the console
    # lines, the evidence page's figures and the side-by-side rows
    columns = THROUGHPUT_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return throughput_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return {
            **throughput_cells(results, run, run.manifest().gpus, price),
            **open_loop_cell(results, run),
            **slo_cell(results, run),
            **ask_cell(results, run),
        }

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)

    def figures(self, results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
        return figures(results, runs)

    def comparison(self, results: Path, run_a: str, run_b: str) -> list[tuple[str, str, str, str]]:
        return throughput_comparison(results, run_a, run_b)


THROUGHPUT = ThroughputCheck()
