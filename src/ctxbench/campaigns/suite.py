"""Run the checks against one deployment: launch its replicas, run the checks, stop, report.

Start the engine(s), record the exact commands, version, cold start and limit, run the probe and the
three claims' checks in order (each optional) through one client (or a router over replicas),
snapshot `/metrics` before and after each check, stop, and write the run's report. A campaign runs
this once per deployment; the demo and the GPU validation are settings of it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import __version__
from ..checks.base import RunContext
from ..checks.catalog import Checks, longest_prompt, selected
from ..client import event_loop
from ..client.router import Router
from ..client.stream import Client, Timeouts
from ..client.wire import arrival_clock
from ..engines.chat_template import TEMPLATE_FILE, compare_with_counter, template_warnings
from ..engines.deployment import DeploymentPlan, Running, merged_samples
from ..engines.kinds import engine
from ..engines.limits import ContextLimit, ContextLimitUnstated, read_context_limit
from ..engines.llamacpp import LlamaServerConfig
from ..engines.models import gguf_shape
from ..engines.prom import common_metrics
from ..engines.server import EngineDied
from ..errors import CtxbenchError
from ..measure.telemetry import BETWEEN_CHECKS, TELEMETRY_FILE, GpuSampler
from ..report.run_page import write_run_report
from ..store.run_dir import RunDir, git_revision, new_run_id
from ..store.run_files import Attempt, EngineEntry, Failure, Manifest
from ..text.haystack import pool_for
from ..text.tokens import (
    NotCounting,
    ServerTokenCounter,
    TemplatedCounter,
    TokenCounter,
    require_content_counted,
)


def _context_limit(plan: DeploymentPlan, running: Running, checks: Checks) -> ContextLimit | None:
    """The limit a request may hold: the campaign file's `limit_tokens`, else what the server states; a
    server that states none is refused only where a check needs the limit (capacity, needle)."""
    if plan.limit_tokens is not None:
        return ContextLimit(plan.limit_tokens, "limit_tokens in the campaign file")
    try:
        return read_context_limit(
            running.base_urls[0],
            api_key=running.api_key,
            fix="limit_tokens = N in the deployment's table",
            model=plan.served,
            model_fix="set the deployment's served_name",
        )
    except ContextLimitUnstated:
        if any(check.needs_limit for check, _ in selected(checks)):
            raise
        return None


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def clock_anchor() -> dict[str, int | str]:
    """One `perf_counter_ns` reading paired with wall-clock time, to place a run's stamps on a calendar, and
    what stamps an arrival here: the kernel's receive time of the bytes, or the time they were read."""
    return {"perf_counter_ns": time.perf_counter_ns(), "unix_ns": time.time_ns(), "arrivals": arrival_clock()}


def run_suite(
    target: DeploymentPlan | LlamaServerConfig,
    counter: TokenCounter | Callable[[str], TokenCounter],
    checks: Checks,
    results: Path,
    *,
    deployment: str,
    campaign: str,
    note: str = "",
    gpus: int | None = None,
    random_weights: bool = False,
    extra_manifest: dict[str, Any] | None = None,
    on_status: Callable[[str], None] = lambda message: None,
    on_request_done: Callable[[], None] = lambda: None,
    resume: Path | None = None,
    force: bool = False,
    on_run: Callable[[RunDir], None] = lambda run: None,
    repeat: int = 1,
    telemetry_interval_s: float = 0.5,
) -> RunDir:
    """Launch `target` (every replica), run `checks` against it, stop it, write `report.md`; returns the run.

    `counter` counts prompt tokens; a callable is given the first replica's URL once it is ready. `repeat`
    (the campaign's repeat number) goes into the run id (`-r2`...) and the manifest. GPU telemetry is sampled
    every `telemetry_interval_s` (0: off) into `telemetry.jsonl`, tagged with the running check.

    With `resume` (a run directory), the same run continues with the same seeds: units of work that
    finished on an earlier attempt (a check, a ramp users setting) are skipped unless `force`; the
    records of an interrupted attempt stay in `requests.jsonl`, and the new attempt's ids end in `-a<N>`.
    If the engine does not start or exits during a check, the manifest records the failure with the log
    tail, the report is still written, and the error is raised for the campaign to mark the deployment
    failed (`EngineNotReady`, `EngineDied`).
    """
    plan = DeploymentPlan.llamacpp(target, deployment) if isinstance(target, LlamaServerConfig) else target
    if resume is not None:
        previous = Manifest.load(resume)
        run = RunDir(resume, attempt=len(previous.attempts or [None]) + 1)
    else:
        previous = Manifest()
        run = RunDir.create(results, new_run_id(campaign, deployment, f"r{repeat}" if repeat > 1 else ""))
    # A new attempt draws new documents: the interrupted attempt's prompts may sit in the server's cache.
    scope = (campaign, deployment, run.run_id) + ((f"attempt{run.attempt}",) if run.attempt > 1 else ())
    skip = set() if force else run.completed_units()
    on_run(run)
    manifest = Manifest.model_validate(
        {
            "ctxbench_version": __version__,
            "git_revision": git_revision(),
            "deployment": deployment,
            "campaign": campaign,
            "model": plan.model,
            "tokenizer": None if callable(counter) else counter.source,
            "checks": [check.name for check, _ in selected(checks)],
            "check_parameters": checks.model_dump(mode="json", exclude_none=True),
            "seed_scope": list(scope),
            "started_at": previous.started_at or utc_now(),
            "attempts": [
                *previous.attempts,
                Attempt(attempt=run.attempt, started_at=utc_now(), clock=clock_anchor(), force=force),
            ],
            "note": note,
            "gpus": plan.gpu_count if gpus is None else gpus,
            "random_weights": random_weights,
            "repeat": repeat,
            "gpu_telemetry": {"file": TELEMETRY_FILE, "interval_s": telemetry_interval_s},
            "model_shape": gguf_shape(Path(plan.model)) if plan.model.endswith(".gguf") else None,
            "event_loop": event_loop.name(),
            **(extra_manifest or {}),
        }
    )
    on_status(
        f"starting {engine(plan.engine).title} ({len(plan.specs) or len(plan.urls)} replica(s)) for "
        f"{deployment}"
    )
    made = None  # a counter made here (the server's, say) is closed here
    try:
        with Running(plan, run.path) as running:
            limit = _context_limit(plan, running, checks)
            counting = any(check.needs_counter for check, _ in selected(checks))
            if not counting:  # the probe alone: no tokenizer is asked for, none is loaded or checked
                counter = NotCounting()
            elif callable(counter):  # a counter that needs the server (its /tokenize) is made now
                counter = made = counter(running.base_urls[0])
            chat_template, template = running.chat_template()
            if counting and isinstance(counter, TemplatedCounter) and not counter.chat_template:
                # A model without a chat template (a base model's GGUF): count with the template the server
                # renders with where it states it, else with the server's own counter; never a refusal.
                if template:
                    counter.chat_template = template
                    chat_template["counted_with"] = "the server's template: the model has none"
                else:
                    counter = made = ServerTokenCounter(running.base_urls[0], plan.served)
                    chat_template["counted_with"] = "the server's counter: the model has none"
            if counting:
                require_content_counted(counter)
            compare_with_counter(chat_template, template, counter.chat_template)
            if template is not None:
                (run.path / TEMPLATE_FILE).write_text(template)
            for warning in template_warnings(chat_template):
                on_status(f"warning: {warning}")
            source = engine(plan.engine).source
            described = EngineEntry.model_validate(
                {
                    **running.describe(),
                    "context_limit_per_slot": limit.tokens if limit else None,
                    **({"context_limit_source": limit.source} if limit else {}),
                    **({"source": source} if source is not None else {}),
                }
            )
            said = {"chat_template": chat_template, "tokenizer": counter.source, "engine": described}
            manifest = manifest.model_copy(update=said)
            run.write_manifest(manifest)
            cold = manifest.engine.cold_start_s
            on_status(
                f"ready{f' in {cold:.1f} s' if cold else ''} at {', '.join(running.base_urls)}; "
                + (f"limit {limit.tokens} tokens a request" if limit else "no context limit stated")
            )
            sampled = [g for gpus in plan.replica_gpus for g in gpus]
            with GpuSampler(
                run.path / TELEMETRY_FILE, interval_s=telemetry_interval_s, gpus=sampled, attempt=run.attempt
            ) as sampler:
                _run_checks(
                    running,
                    plan,
                    limit,
                    counter,
                    checks,
                    run,
                    results,
                    scope,
                    skip,
                    deployment,
                    force,
                    on_status,
                    on_request_done,
                    sampler,
                )
    except CtxbenchError as exc:  # the engine did not start, or died mid-check: the run says so
        during = exc.during if isinstance(exc, EngineDied) and exc.during else None
        failure = Failure(error=str(exc), at=utc_now(), during=during)
        manifest = manifest.model_copy(update={"failed": failure})
        raise
    finally:
        if made is not None:
            made.close()
        run.sync()  # every record on disk before the run is marked ended
        manifest = manifest.model_copy(update={"ended_at": utc_now()})
        run.write_manifest(manifest)
        write_run_report(run)
    return run


def _run_checks(
    running: Running,
    plan: DeploymentPlan,
    limit: ContextLimit | None,
    counter: TokenCounter,
    checks: Checks,
    run: RunDir,
    results: Path,
    scope: tuple[str, ...],
    skip: set[str],
    deployment: str,
    force: bool,
    on_status: Callable[[str], None],
    on_request_done: Callable[[], None],
    sampler: GpuSampler,
) -> None:
    def snapshot(check: str, phase: str) -> None:
        per_replica = running.metrics()
        run.append_metrics(check, phase, per_replica, common_metrics)
        if check == "run":
            run.write_metrics_snapshot(phase, merged_samples(per_replica))

    snapshot("run", "before")
    stated = limit.tokens if limit else 0  # 0: none stated; capacity and needle never run without one
    longest = longest_prompt(checks, stated)

    @contextlib.contextmanager
    def watched(name: str) -> Iterator[None]:
        snapshot(name, "before")
        sampler.check = name
        try:
            yield
        finally:
            sampler.check = BETWEEN_CHECKS
        try:
            running.check_alive()  # an engine that died mid-check fails the deployment, log tail included
        except EngineDied as died:
            died.during = name  # its result says nothing of the claim: the report names the death instead
            raise
        snapshot(name, "after")

    async def run_all() -> None:
        clients = [
            Client(
                url,
                plan.served,
                api_key=running.api_key,
                on_interrupted=run.append,
                timeouts=Timeouts(read_s=plan.read_timeout_s),
            )
            for url in running.base_urls
        ]
        client = clients[0] if len(clients) == 1 else Router(clients)
        async with client:
            ctx = RunContext(
                client,
                lambda: pool_for(counter, longest),
                counter,
                limit,
                run,
                results,
                scope,
                deployment,
                force,
                snapshot,
                on_request_done,
            )
            for check, params in selected(checks):
                if not check.pending(params, skip):
                    continue
                if (line := check.announce(params, ctx)) is not None:
                    on_status(line)
                with watched(check.name):
                    await check.run(ctx, params)
                run.mark_completed(check.name)  # only once the engine outlived it: a death reruns it

    event_loop.run(run_all())
    snapshot("run", "after")
