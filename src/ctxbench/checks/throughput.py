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
import itertools
import json
import pickle
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import metrics
from ..client import Client
from ..errors import CtxbenchError, PromptSourceError
from ..params import ThroughputParams
from ..records import RequestRecord
from ..results.store import RunDir, write_json_atomic
from ..router import Router
from ..steady import steady_state
from ..text.code import CodeGenerator
from ..text.haystack import SEPARATOR, UnitPool, build_haystack, request_seed
from ..text.tokens import TokenCounter
from .open_loop import rate_summary, rate_unit, run_rate

QUESTIONS = {
    "prose": "Summarise the passage above in three sentences.",
    "code": "Explain what the code above does, function by function, then suggest one improvement.",
}


SAMPLING = {"temperature": 0.0}


def read_prompts(path: Path) -> list[list[dict[str, str]]]:
    """A JSONL file of `{"prompt": "..."}` or `{"messages": [...]}` lines -> chat messages per line."""
    prompts = []
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise PromptSourceError(f"{path}: cannot read the prompts file ({exc.strerror}).") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise PromptSourceError(
                f"{path}:{number}: not JSON; write one object a line, "
                '{"prompt": "..."} or {"messages": [...]}.'
            ) from None
        if isinstance(entry, dict) and isinstance(entry.get("prompt"), str):
            prompts.append([{"role": "user", "content": entry["prompt"]}])
        elif isinstance(entry, dict) and isinstance(entry.get("messages"), list):
            prompts.append([dict(m) for m in entry["messages"]])
        else:
            raise PromptSourceError(f'{path}:{number}: needs a "prompt" string or a "messages" list.')
    if not prompts:
        raise PromptSourceError(f"{path}: no prompts in the file.")
    return prompts


class PromptMaker:
    """Fresh prompts of the spec's source, one per seed; built in a worker thread by the check."""

    def __init__(
        self, params: ThroughputParams, prose: UnitPool, counter: TokenCounter, scope: tuple[str, ...]
    ) -> None:
        self.params = params
        self.file_prompts = None if params.source in QUESTIONS else read_prompts(Path(params.source))
        self.pool = prose
        if params.source == "code":
            snippets = [CodeGenerator(request_seed(*scope, "code", i)).snippet() for i in range(512)]
            counts = counter.count_many([SEPARATOR + s for s in snippets])  # joined as paragraphs are
            self.pool = UnitPool(snippets, counts, counter, "ctxbench code generator")
        self.prefix: list[dict[str, str]] = []
        if params.shared_prefix_tokens:
            # Whole prose units up to the size: the same system prompt on every request of the campaign.
            rng = random.Random(request_seed(*scope, "shared-prefix"))
            order = rng.sample(range(len(prose.texts)), len(prose.texts))
            chosen = list(
                itertools.takewhile(
                    lambda total: total <= params.shared_prefix_tokens,
                    itertools.accumulate(prose.counts[i] for i in order),
                )
            )
            text = "\n\n".join(prose.texts[i] for i in order[: max(1, len(chosen))])
            self.prefix = [{"role": "system", "content": text}]

    def __call__(self, seed: int, index: int) -> tuple[list[dict[str, str]], int | None]:
        """(messages, planned prompt tokens or None when unknown)."""
        if self.file_prompts is not None:
            return [*self.prefix, *self.file_prompts[index % len(self.file_prompts)]], None
        haystack = build_haystack(
            self.pool,
            self.params.prompt_tokens,
            seed,
            history=self.prefix,
            question=QUESTIONS[self.params.source],
        )
        return list(haystack.messages), haystack.planned_tokens


async def run_throughput(
    client: Client,
    prompts: PromptMaker,
    params: ThroughputParams,
    run: RunDir,
    scope: tuple[str, ...],
    *,
    snapshot: Callable[[str, str], None] = lambda unit, phase: None,
    on_request: Callable[[RequestRecord], None] | None = None,
    skip_completed: bool = True,
) -> dict[str, Any]:
    """Run every level not finished yet; returns (and writes) `throughput.json`."""
    done = run.completed_units() if skip_completed else set()
    path = run.path / "throughput.json"
    summary: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"levels": {}}
    summary["spec"] = params.model_dump(mode="json")
    for users in params.levels:
        unit = f"throughput-u{users}"
        if unit in done:
            continue
        snapshot(unit, "before")
        if params.ray_actors > 0:
            from .throughput_ray import users_over_ray

            records = await users_over_ray(client, prompts, params, run, scope, users, on_request)
        elif params.client_processes > 1 and users > 1:
            records = await _users_in_processes(client, prompts, params, run, scope, users, on_request)
        else:
            started = time.perf_counter()
            per_user = await asyncio.gather(
                *(
                    run_user(client, prompts, params, run, scope, users, user, started, on_request)
                    for user in range(users)
                )
            )
            records = [r for mine in per_user for r in mine]
        snapshot(unit, "after")
        measured = [r for r in records if r.labels["warmup"] == "0"]
        summary["levels"][str(users)] = level_summary(measured, params, run.attempt)
        write_json_atomic(path, summary)
        run.mark_completed(unit)
    for rate in offered_rates(params, summary):
        unit = rate_unit(rate)
        saturated_at = summary.get("saturated_at")
        if unit in done:
            continue
        if saturated_at is not None and rate > saturated_at:
            reason = f"not offered: the server saturated at {saturated_at:g} requests/s"
            summary.setdefault("rates", {})[f"{rate:g}"] = {"skipped": reason}
            write_json_atomic(path, summary)
            continue
        snapshot(unit, "before")
        records = await run_rate(client, prompts, params, run, scope, rate, _extra_body(params), on_request)
        snapshot(unit, "after")
        line = rate_summary(records, params, rate, run.attempt)
        summary.setdefault("rates", {})[f"{rate:g}"] = line
        if line["saturated"]:
            summary["saturated_at"] = rate
        write_json_atomic(path, summary)
        run.mark_completed(unit)
    return summary


def offered_rates(params: ThroughputParams, summary: dict[str, Any]) -> list[float]:
    """`rates`, or `rates_of_capacity` times the best requests/s of this run's closed-loop levels (written to
    the summary as `capacity_requests_per_s`; none measured: no rate is offered, and the summary says so)."""
    if not params.rates_of_capacity:
        return sorted(params.rates)
    measured = [line.get("requests_per_s") for line in summary["levels"].values()]
    capacity = max((value for value in measured if value), default=None)
    summary["capacity_requests_per_s"] = capacity
    if capacity is None:
        summary["rates_skipped"] = "no closed-loop level answered, so there is no capacity to scale"
        return []
    return sorted(float(f"{factor * capacity:.3g}") for factor in params.rates_of_capacity)


def _extra_body(params: ThroughputParams) -> dict[str, object]:
    return {**SAMPLING, **({"ignore_eos": True} if params.ignore_eos else {})}


async def run_user(
    client: Client,
    prompts: PromptMaker,
    params: ThroughputParams,
    run: RunDir,
    scope: tuple[str, ...],
    users: int,
    user: int,
    started: float,
    on_request: Callable[[RequestRecord], None] | None,
) -> list[RequestRecord]:
    extra = _extra_body(params)
    out = []
    # A little jitter so that U users do not all arrive in the same millisecond of the first step.
    await asyncio.sleep(random.Random(request_seed(*scope, "tput-start", users, user)).uniform(0, 0.05))
    for index in itertools.count():
        warmup = index < params.warmup_requests
        measured = index - params.warmup_requests
        if not warmup and (
            measured >= params.requests_per_user
            if params.requests_per_user is not None
            else time.perf_counter() - started >= params.duration_s
        ):
            break
        enqueued = time.perf_counter_ns()  # before the prompt is built: client-side time is queueing, shown
        seed = request_seed(*scope, "throughput", users, user, index)
        messages, planned = await asyncio.to_thread(prompts, seed, user * 100_000 + index)
        record = await client.chat(
            messages,
            max_tokens=params.output_tokens,
            request_id=run.request_id(f"tput-u{users}-user{user}-{index}"),
            labels={
                "check": "throughput",
                "users": str(users),
                "user": str(user),
                "index": str(index),
                "warmup": "1" if warmup else "0",
                "source": params.source,
                "shared_prefix_tokens": str(params.shared_prefix_tokens),
                "planned_tokens": "" if planned is None else str(planned),
            },
            extra_body=extra,
            enqueued_ns=enqueued,
        )
        run.append(record)
        out.append(record)
        if on_request is not None:
            on_request(record)
    return out


@dataclass(frozen=True)
class WorkerJob:
    """What one client process of a level needs; pickled to its stdin (`checks/throughput_worker.py`)."""

    client: dict[str, Any]  # `client_settings`: the API key travels here, never on a command line
    prompts: PromptMaker
    params: ThroughputParams
    run_path: Path
    attempt: int
    scope: tuple[str, ...]
    users: int  # the level
    process: int
    user_ids: tuple[int, ...]


READY = b"ready\n"  # a worker's first line: its client is made, it waits for the level's start time


def client_settings(client: Client | Router) -> dict[str, Any]:
    """How a worker process makes the same client (`make_client`): one `Client`, or a `Router` over the
    replicas'."""
    if isinstance(client, Router):
        return {"router": True, "clients": [one.settings() for one in client.clients]}
    return {"router": False, "clients": [client.settings()]}


def make_client(settings: dict[str, Any]) -> Client | Router:
    clients = [Client(**one) for one in settings["clients"]]
    return Router(clients) if settings["router"] else clients[0]


async def _users_in_processes(
    client: Client | Router,
    prompts: PromptMaker,
    params: ThroughputParams,
    run: RunDir,
    scope: tuple[str, ...],
    users: int,
    on_request: Callable[[RequestRecord], None] | None,
) -> list[RequestRecord]:
    """One level's users spread round-robin over `spec.client_processes` worker processes
    (`checks/throughput_worker.py`); their records are written here as they come back."""
    processes = min(params.client_processes, users)
    settings = client_settings(client)
    workers: list[asyncio.subprocess.Process] = []
    records: list[RequestRecord] = []

    async def collect(worker: asyncio.subprocess.Process) -> int:
        assert worker.stdout is not None
        while line := await worker.stdout.readline():
            record = RequestRecord.model_validate_json(line)
            run.append(record)
            records.append(record)
            if on_request is not None:
                on_request(record)
        return await worker.wait()

    try:
        for index in range(processes):
            worker = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ctxbench.checks.throughput_worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 26,
            )
            workers.append(worker)
            assert worker.stdin is not None
            job = WorkerJob(
                settings,
                prompts,
                params,
                run.path,
                run.attempt,
                scope,
                users,
                index,
                tuple(range(index, users, processes)),
            )
            worker.stdin.write(pickle.dumps(job))
            await worker.stdin.drain()
        for worker in workers:  # every worker has its client: start all users together
            assert worker.stdout is not None
            if await worker.stdout.readline() != READY:
                raise CtxbenchError(
                    f"many users, {users} users: a client process did not start "
                    f"(exit {await worker.wait()}); its messages are above."
                )
        started = time.perf_counter()  # CLOCK_MONOTONIC, the workers' clock too
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{started!r}\n".encode())
            await worker.stdin.drain()
            worker.stdin.close()
        codes = await asyncio.gather(*(collect(worker) for worker in workers))
    finally:
        for worker in workers:
            if worker.returncode is None:  # interrupted or failed: no client process outlives the check
                worker.kill()
                await worker.wait()
    failed = [code for code in codes if code != 0]
    if failed:
        raise CtxbenchError(
            f"many users, {users} users: {len(failed)} of {processes} client processes failed "
            f"(exit {failed}); their messages are above, and the records they sent are kept."
        )
    return records


def level_summary(records: Sequence[RequestRecord], params: ThroughputParams, attempt: int) -> dict[str, Any]:
    figures = metrics.throughput(records, params.ttft_slo_s, params.tpot_slo_s)
    steady = steady_state(records)
    return {
        **dataclasses.asdict(figures),
        "steady": None if steady is None else dataclasses.asdict(steady),
        "attempt": attempt,
        "request_ids": [r.request_id for r in records],
    }
