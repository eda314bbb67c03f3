"""Many users as a closed loop: each of a level's users sends its next request when the previous ends, in
this process or spread over client processes (`worker.py`) or Ray actors (`ray.py`),
which make the same client from `client_settings` and run the same `run_user`."""

from __future__ import annotations

import asyncio
import itertools
import pickle
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...client.chat import ChatClient
from ...client.router import Router
from ...client.stream import Client
from ...config.load_params import ThroughputParams
from ...errors import CtxbenchError
from ...records import RequestRecord
from ...store.run_dir import RunDir
from ...text.haystack import request_seed
from ..prompts import PromptMaker
from .labels import ThroughputLabels

SAMPLING = {"temperature": 0.0}


def extra_body(params: ThroughputParams) -> dict[str, object]:
    return {**SAMPLING, **({"ignore_eos": True} if params.ignore_eos else {})}


@dataclass(frozen=True)
class Level:
    """One closed-loop level as its users run it, in this process, over client processes or Ray actors: the
    client, the prompts, the check's params, the run its records go to, the seed scope, the level's users, who
    hears of each request, and a search's repeat of the level (`repeat` > 0: its own prompts and ids).

    A level judged against an SLO runs in rounds until its requests decide it (`check._Levels`): a later
    round's users number their requests on from `first` (fresh prompts and ids, no warm-up), each sending
    `per_user` (None: the params' count or duration), none sent `budget_s` or more after the round began."""

    client: ChatClient
    prompts: PromptMaker
    params: ThroughputParams
    run: RunDir
    scope: tuple[str, ...]
    users: int
    on_request: Callable[[RequestRecord], None] | None = None
    repeat: int = 0
    first: int = 0
    per_user: int | None = None
    budget_s: float | None = None

    def job(self, settings: dict[str, Any], index: int, count: int) -> WorkerJob:
        """The share of the level's users that client process or actor `index` of `count` runs."""
        return WorkerJob(
            settings,
            self.prompts,
            self.params,
            self.run.path,
            self.run.attempt,
            self.scope,
            self.users,
            index,
            tuple(range(index, self.users, count)),
            self.repeat,
            self.first,
            self.per_user,
            self.budget_s,
        )


async def run_user(level: Level, user: int, started: float) -> list[RequestRecord]:
    """One user of a level: requests back to back until its count or the level's duration is done."""
    client, prompts, params, run, scope = level.client, level.prompts, level.params, level.run, level.scope
    users, on_request, repeat = level.users, level.on_request, level.repeat
    extra = extra_body(params)
    again = (repeat,) if repeat else ()
    name = f"u{users}" + (f"-rep{repeat}" if repeat else "")
    out = []
    # A little jitter so that U users do not all arrive in the same millisecond of the first step.
    await asyncio.sleep(random.Random(request_seed(*scope, "tput-start", users, user)).uniform(0, 0.05))
    per_user = level.per_user if level.per_user is not None else params.requests_per_user
    measured = 0  # this round's
    for index in itertools.count(level.first):
        warmup = index < params.warmup_requests
        elapsed = time.perf_counter() - started
        if level.budget_s is not None and elapsed >= level.budget_s:
            break
        if not warmup and (measured >= per_user if per_user is not None else elapsed >= params.duration_s):
            break
        measured += not warmup
        enqueued = time.perf_counter_ns()  # before the prompt is built: client-side time is queueing, shown
        seed = request_seed(*scope, "throughput", users, user, index, *again)
        messages, planned = await asyncio.to_thread(prompts, seed, user * 100_000 + index)
        record = await client.chat(
            messages,
            max_tokens=params.output_tokens,
            request_id=run.request_id(f"tput-{name}-user{user}-{index}"),
            labels=ThroughputLabels(
                users=users,
                user=user,
                index=index,
                warmup=warmup,
                repeat=repeat or None,
                source=params.source,
                shared_prefix_tokens=params.shared_prefix_tokens,
                planned_tokens=planned,
            ).written(),
            extra_body=extra,
            enqueued_ns=enqueued,
            cache=prompts.intent,
        )
        run.append(record)
        out.append(record)
        if on_request is not None:
            on_request(record)
    return out


@dataclass(frozen=True)
class WorkerJob:
    """What one client process of a level needs; pickled to its stdin (`worker.py`)."""

    client: dict[str, Any]  # `client_settings`: the API key travels here, never on a command line
    prompts: PromptMaker
    params: ThroughputParams
    run_path: Path
    attempt: int
    scope: tuple[str, ...]
    users: int  # the level
    process: int
    user_ids: tuple[int, ...]
    repeat: int = 0  # a search's repeat of the level (`run_user`)
    first: int = 0  # a later round's (`Level`)
    per_user: int | None = None
    budget_s: float | None = None

    async def run_users(self, client: ChatClient, run: RunDir, started: float) -> None:
        """This job's users, from `started` (perf_counter), each record appended to `run`."""
        level = Level(
            client,
            self.prompts,
            self.params,
            run,
            self.scope,
            self.users,
            None,
            self.repeat,
            self.first,
            self.per_user,
            self.budget_s,
        )
        await asyncio.gather(*(run_user(level, u, started) for u in self.user_ids))


READY = b"ready\n"  # a worker's first line: its client is made, it waits for the level's start time


def client_settings(client: ChatClient) -> dict[str, Any]:
    """How a worker process makes the same client (`make_client`): one `Client`, or a `Router` over the
    replicas'."""
    if isinstance(client, Router):
        return {"router": True, "clients": [one.settings() for one in client.clients]}
    if isinstance(client, Client):
        return {"router": False, "clients": [client.settings()]}
    raise TypeError(f"client processes need a Client or a Router, not {type(client).__name__}")


def make_client(settings: dict[str, Any]) -> Client | Router:
    clients = [Client(**one) for one in settings["clients"]]
    return Router(clients) if settings["router"] else clients[0]


async def users_in_processes(level: Level) -> list[RequestRecord]:
    """One level's users spread round-robin over `params.client_processes` worker processes
    (`worker.py`); their records are written here as they come back."""
    run, users, on_request = level.run, level.users, level.on_request
    processes = min(level.params.client_processes, users)
    settings = client_settings(level.client)
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
                "ctxbench.checks.throughput.worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 26,
            )
            workers.append(worker)
            assert worker.stdin is not None
            worker.stdin.write(pickle.dumps(level.job(settings, index, processes)))
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
