"""A client process of the many-users check: runs some users of one level and sends their records back.

`checks.throughput` starts one per `client_processes` when that is above 1 and writes the job to its stdin,
pickled (the parent is the same ctxbench: trusted; the API key travels this way, never on a command line).
The worker makes its client, says `ready`, waits for the level's start time on stdin (every worker's users
start together, whatever each took to start), runs its users, and writes each record to stdout as one JSON
line the moment its request ends; the parent writes it to the run's `requests.jsonl`. Stamps are
`perf_counter_ns`, CLOCK_MONOTONIC: the same clock in every process, so records of all workers compare.
"""

from __future__ import annotations

import asyncio
import pickle
import sys
from pathlib import Path

from ...client import event_loop
from ...records import RequestRecord
from ...store.run_dir import RunDir
from .closed_loop import READY, WorkerJob, make_client
from .labels import ClientLabels


class _PipeRun(RunDir):
    """The run as a worker sees it: the same request ids; records go to the parent, not to the file, labelled
    with the client process that sent them (`client_process`)."""

    def __init__(self, path: Path, attempt: int, process: int) -> None:
        super().__init__(path, attempt)
        self.client = ClientLabels(client_process=process).written()

    def append(self, record: RequestRecord) -> None:
        record = record.model_copy(update={"labels": {**record.labels, **self.client}})
        sys.stdout.write(record.model_dump_json() + "\n")
        sys.stdout.flush()


async def _work(job: WorkerJob) -> None:
    client = make_client(job.client)
    run = _PipeRun(job.run_path, job.attempt, job.process)
    async with client:
        sys.stdout.buffer.write(READY)
        sys.stdout.flush()
        started = float(await asyncio.to_thread(sys.stdin.buffer.readline))
        await job.run_users(client, run, started)


def main() -> None:
    job = pickle.load(sys.stdin.buffer)
    if not isinstance(job, WorkerJob):
        raise SystemExit("ctxbench.checks.throughput.worker is started by the many-users check, not by hand")
    event_loop.run(_work(job))


if __name__ == "__main__":
    main()
