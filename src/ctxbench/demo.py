"""The demo campaign: SmolLM2-135M-Instruct (F16) on the embedded CPU llama-server.

Runs what exists today (the probe) and writes `results/runs/<run_id>/` plus a report. Each
later check extends it. The model is real, so its answers are real findings at 135M scale.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import __version__
from .checks.capacity import CapacitySpec, run_capacity
from .checks.conversation import RampSpec, run_ramp
from .checks.needle import NeedleSpec, run_needle
from .checks.probe import ProbeSpec, probe_request_count, run_probe
from .engines.limits import read_context_limit
from .text.haystack import pool_for
from .text.tokens import gguf_token_counter
from .client import Client
from .engines.build import LlamaCppBuild
from .engines.llamacpp import LlamaServer, LlamaServerConfig
from .engines.models import DEMO_CONTEXT, demo_model_path
from .errors import EngineNotReady
from .report.render import RAMP_TABLE, run_report
from .results.store import RunDir, git_revision, new_run_id

DEMO_SLOTS = 2
DEPLOYMENT = "smollm2-135m-f16 on llama.cpp (CPU)"
# Sized to finish in under four minutes on 2 CPU cores, where SmolLM2 prefills 150-450 tokens/s.
DEMO_NEEDLE = NeedleSpec(lengths=(1024, 3072))
DEMO_RAMP = RampSpec(start_tokens=1024, end_tokens=4096, turns=4, max_tokens=96, users=(1, 2), stagger_s=2.0)


def demo_request_count(spec: ProbeSpec, needle: NeedleSpec = DEMO_NEEDLE) -> int:
    """Requests the demo sends: the probe's, two for capacity, one per needle grid cell."""
    ramp_turns = DEMO_RAMP.turns * sum(DEMO_RAMP.users)
    return probe_request_count(spec) + 2 + len(needle.lengths) * len(needle.depths) + ramp_turns


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def clock_anchor() -> dict[str, int]:
    """One `perf_counter_ns` reading paired with wall-clock time, to place a run's stamps on a calendar."""
    return {"perf_counter_ns": time.perf_counter_ns(), "unix_ns": time.time_ns()}


def run_demo(
    results: Path,
    *,
    spec: ProbeSpec | None = None,
    on_status: Callable[[str], None] = lambda message: None,
    on_request_done: Callable[[], None] = lambda: None,
) -> RunDir:
    """Start llama-server with the demo model, run the probe, stop, and write the report."""
    spec = spec or ProbeSpec(document_chars=0)
    build = LlamaCppBuild()
    model = demo_model_path()
    if not build.is_built() or not model.exists():
        raise EngineNotReady(
            "the demo needs the built engine and the demo model: run `ctxbench engine build llamacpp` and "
            "`ctxbench model prepare demo` (or `make demo`, which does both)."
        )
    run = RunDir.create(results, new_run_id("demo", "smollm2-135m-f16", "probe"))
    config = LlamaServerConfig(
        binary=build.server, model=model, ctx_size=DEMO_CONTEXT * DEMO_SLOTS, parallel=DEMO_SLOTS,
        alias="smollm2-135m-instruct",
    )
    manifest: dict[str, Any] = {
        "ctxbench_version": __version__,
        "git_revision": git_revision(),
        "deployment": DEPLOYMENT,
        "model": str(model),
        "checks": ["probe", "capacity", "needle", "ramp"],
        "check_parameters": {
            "probe": dataclasses.asdict(spec),
            "capacity": dataclasses.asdict(CapacitySpec()),
            "needle": dataclasses.asdict(DEMO_NEEDLE),
            "ramp": dataclasses.asdict(DEMO_RAMP),
        },
        "started_at": utc_now(),
        "clock": clock_anchor(),
        "note": "SmolLM2-135M-Instruct, real weights, F16, on CPU: speeds are this machine's, not a GPU's.",
    }
    on_status(f"starting llama-server with {model.name}")
    with LlamaServer(config, run.path / "server.log") as server:
        manifest["engine"] = {
            "name": "llama.cpp llama-server",
            "version": server.version(),
            "command": server.command,
            "cold_start_s": server.ready_s,
            "context_limit_per_slot": server.slot_context_limit(),
        }
        run.write_manifest(manifest)
        run.write_metrics_snapshot("before", server.metrics())
        on_status(f"server ready in {server.ready_s:.1f} s at {server.base_url}; probing")

        counter = gguf_token_counter(model)
        pool = pool_for(counter, DEMO_CONTEXT)
        manifest["tokenizer"] = counter.source
        manifest["seed_scope"] = ["demo", "smollm2-135m-f16", run.run_id]
        run.write_manifest(manifest)
        limit = read_context_limit(server.base_url)
        scope = ("demo", "smollm2-135m-f16", run.run_id)

        async def checks() -> None:
            async with Client(server.base_url, config.alias) as client:
                await run_probe(client, spec, run, lambda _: on_request_done())
                on_status("claim 1: capacity near the 8K limit, and one prompt over it")
                await run_capacity(client, pool, limit, CapacitySpec(), run, scope)
                on_request_done()
                on_request_done()
                on_status("claim 2: a planted code in fresh 1K and 3K documents at depths 10/50/90%")
                await run_needle(client, pool, DEMO_NEEDLE, run, scope, limit.tokens,
                                 on_trial=lambda _: on_request_done())
                on_status("claim 3: a conversation growing 1K -> 4K tokens in 4 turns, alone, then beside a second user")
                await run_ramp(client, pool, DEMO_RAMP, run, scope, deployment=DEPLOYMENT,
                               table=results / RAMP_TABLE, on_turn=lambda _: on_request_done())

        asyncio.run(checks())
        run.write_metrics_snapshot("after", server.metrics())
    manifest["ended_at"] = utc_now()
    run.write_manifest(manifest)
    (run.path / "report.md").write_text(run_report(run))
    return run
