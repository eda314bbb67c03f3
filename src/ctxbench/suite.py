"""Run the checks that exist against one llama-server deployment that ctxbench launches.

Start the server, record its exact command, version, cold start and limit, run the probe and the
three claims' checks in order (each optional), snapshot `/metrics` before and after, stop the
server, and write the run's report. The demo and the GPU validation are two settings of this.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .checks.capacity import CapacitySpec, run_capacity
from .checks.conversation import RampSpec, run_ramp
from .checks.needle import NeedleSpec, run_needle
from .checks.probe import ProbeSpec, probe_request_count, run_probe
from .client import Client
from .engines.build import LLAMACPP_SDIST_VERSION
from .engines.limits import read_context_limit
from .engines.llamacpp import LlamaServer, LlamaServerConfig
from .report.render import run_report
from .results.ramp_table import RAMP_TABLE
from .results.store import RunDir, git_revision, new_run_id, redact_command, redact_env
from .text.haystack import pool_for
from .text.tokens import TokenCounter


@dataclass(frozen=True)
class Suite:
    """Which checks to run, with their parameters; None skips a check."""

    probe: ProbeSpec | None = None
    capacity: CapacitySpec | None = None
    needle: NeedleSpec | None = None
    ramp: RampSpec | None = None

    def request_count(self) -> int:
        """Requests the suite sends (for progress bars)."""
        count = probe_request_count(self.probe) if self.probe else 0
        count += 2 if self.capacity else 0
        count += len(self.needle.lengths) * len(self.needle.depths) if self.needle else 0
        return count + (self.ramp.turns * sum(self.ramp.users) if self.ramp else 0)

    def longest_prompt(self, limit_tokens: int) -> int:
        lengths = [limit_tokens] if self.capacity else []
        lengths += list(self.needle.lengths) if self.needle else []
        lengths += [self.ramp.end_tokens] if self.ramp else []
        return max(lengths, default=1024)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def clock_anchor() -> dict[str, int]:
    """One `perf_counter_ns` reading paired with wall-clock time, to place a run's stamps on a calendar."""
    return {"perf_counter_ns": time.perf_counter_ns(), "unix_ns": time.time_ns()}


def run_suite(
    config: LlamaServerConfig,
    counter: TokenCounter,
    suite: Suite,
    results: Path,
    *,
    deployment: str,
    campaign: str,
    note: str = "",
    gpus: int = 0,
    random_weights: bool = False,
    extra_manifest: dict[str, Any] | None = None,
    on_status: Callable[[str], None] = lambda message: None,
    on_request_done: Callable[[], None] = lambda: None,
    resume: Path | None = None,
    force: bool = False,
) -> RunDir:
    """Launch `config`, run `suite` against it, stop it, and write `report.md`; returns the run.

    With `resume` (a run directory), the same run continues with the same seeds: units of work that
    finished on an earlier attempt (a check, a ramp users setting) are skipped unless `force`; the
    records of an interrupted attempt stay in `requests.jsonl`, and the new attempt's ids end in `-a<N>`.
    """
    if resume is not None:
        previous = json.loads((resume / "manifest.json").read_text())
        run = RunDir(resume, attempt=len(previous.get("attempts", [None])) + 1)
    else:
        previous = {}
        run = RunDir.create(results, new_run_id(campaign, deployment))
    # A new attempt draws new documents: the interrupted attempt's prompts may sit in the server's cache.
    scope = (campaign, deployment, run.run_id) + ((f"attempt{run.attempt}",) if run.attempt > 1 else ())
    skip = set() if force else run.completed_units()
    manifest: dict[str, Any] = {
        "ctxbench_version": __version__,
        "git_revision": git_revision(),
        "deployment": deployment,
        "campaign": campaign,
        "model": str(config.model),
        "tokenizer": counter.source,
        "checks": [name for name, spec in dataclasses.asdict(suite).items() if spec is not None],
        "check_parameters": {k: v for k, v in dataclasses.asdict(suite).items() if v is not None},
        "seed_scope": list(scope),
        "started_at": previous.get("started_at", utc_now()),
        "attempts": [*previous.get("attempts", []), {"attempt": run.attempt, "started_at": utc_now(),
                                                     "clock": clock_anchor(), "force": force}],
        "note": note,
        "gpus": gpus,
        "random_weights": random_weights,
        **(extra_manifest or {}),
    }
    on_status(f"starting llama-server with {config.model.name}")
    with LlamaServer(config, run.path / "server.log") as server:
        limit = read_context_limit(server.base_url)
        manifest["engine"] = {
            "name": "llama.cpp llama-server",
            "version": server.version(),
            "source": f"llama-cpp-python=={LLAMACPP_SDIST_VERSION} sdist, vendor/llama.cpp",
            "command": redact_command(server.command),
            "env": redact_env(config.env),
            "cold_start_s": server.ready_s,
            "context_limit_per_slot": limit.tokens,
        }
        run.write_manifest(manifest)
        run.write_metrics_snapshot("before", server.metrics())
        on_status(f"server ready in {server.ready_s:.1f} s at {server.base_url}; limit {limit.tokens} tokens a slot")
        pool = pool_for(counter, suite.longest_prompt(limit.tokens))

        async def checks() -> None:
            async with Client(server.base_url, config.alias) as client:
                if suite.probe and "probe" not in skip:
                    await run_probe(client, suite.probe, run, lambda _: on_request_done())
                    run.mark_completed("probe")
                if suite.capacity and "capacity" not in skip:
                    on_status(f"claim 1: capacity near the {limit.tokens}-token limit, and one prompt over it")
                    await run_capacity(client, pool, limit, suite.capacity, run, scope)
                    run.mark_completed("capacity")
                    on_request_done()
                    on_request_done()
                if suite.needle and "needle" not in skip:
                    on_status(f"claim 2: planted facts in fresh documents of {list(suite.needle.lengths)} tokens")
                    await run_needle(client, pool, suite.needle, run, scope, limit.tokens,
                                     on_trial=lambda _: on_request_done())
                    run.mark_completed("needle")
                if suite.ramp:
                    on_status(f"claim 3: conversations growing {suite.ramp.start_tokens} -> {suite.ramp.end_tokens} "
                              f"tokens in {suite.ramp.turns} turns, with {list(suite.ramp.users)} users")
                    await run_ramp(client, pool, suite.ramp, run, scope, deployment=deployment,
                                   table=results / RAMP_TABLE, on_turn=lambda _: on_request_done(),
                                   skip_completed=not force)

        asyncio.run(checks())
        run.write_metrics_snapshot("after", server.metrics())
    manifest["ended_at"] = utc_now()
    run.write_manifest(manifest)
    (run.path / "report.md").write_text(run_report(run))
    return run
