"""Run a campaign: per deployment, start it, run its checks, stop it; resumable; failures recorded.

Progress is a JSONL state file per campaign (`results/campaigns/<name>.jsonl`), appended and flushed as
each deployment starts and ends. Running the campaign again skips deployments that finished, resumes
an interrupted one in its own run directory (same seeds, finished units skipped), and tries a failed
one again in a new run. A deployment whose engine does not start, or dies mid-check, is marked failed
with its log tail, and the next deployment runs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..config.deployments import Deployment
from ..config.redaction import redact_env
from ..engines.deployment import plan_deployment
from ..errors import CtxbenchError
from ..store.run_dir import RunDir, safe_name, write_json_atomic
from ..text.tokens import TokenCounter, load_token_counter
from .campaign_file import Campaign
from .preflight import counter_source, preflight
from .suite import run_suite

Status = Literal["started", "done", "failed"]


@dataclass(frozen=True)
class Outcome:
    deployment: str
    status: Status | Literal["skipped"]
    run_id: str | None = None
    error: str | None = None
    exit_code: int = 1  # the error's (errors.py): 3 when the deployment could not be reached


def state_path(campaign: Campaign, results: Path) -> Path:
    return results / "campaigns" / f"{safe_name(campaign.campaign.name)}.jsonl"


def state_key(deployment: str, repeat: int) -> str:
    return deployment if repeat == 1 else f"{deployment}#{repeat}"


def read_state(path: Path) -> dict[str, dict[str, str]]:
    """Each deployment's (and repeat's: `name#2`) latest state line (a torn last line is skipped)."""
    latest: dict[str, dict[str, str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                latest[state_key(entry["deployment"], int(entry.get("repeat", 1)))] = entry
            except (ValueError, KeyError, TypeError):
                continue
    return latest


def campaign_record(campaign: Campaign) -> dict[str, object]:
    """The campaign as run, for the report to be rebuilt from files alone (environment values redacted)."""
    data = campaign.model_dump(mode="json")
    for deployment in data["deployments"]:
        deployment["env"] = redact_env(deployment["env"])
    return data


def state_line(
    deployment: str, status: Status, run_id: str | None, error: str | None = None, repeat: int = 1
) -> str:
    """One line of the campaign's state file."""
    entry = {
        "deployment": deployment,
        "repeat": repeat,
        "status": status,
        "run_id": run_id,
        "error": error,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return json.dumps(entry) + "\n"


def append_line(path: Path, line: str) -> None:
    """Append and fsync: the state survives a crash right after."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def counter_for(deployment: Deployment, model: str) -> Callable[[str], TokenCounter]:
    """The token counter of a deployment: its `tokenizer` (a path, or "server"), else the GGUF's vocabulary,
    else the model directory's tokenizer, else the server's own `/tokenize` (made once the server is up)."""
    tokenizer, gguf = counter_source(deployment, model)
    return lambda url: load_token_counter(tokenizer, gguf, url, deployment.served)


def run_campaign(
    campaign: Campaign,
    *,
    results: Path | None = None,
    names: list[str] | None = None,
    force: bool = False,
    on_status: Callable[[str], None] = lambda message: None,
    on_request_done: Callable[[], None] = lambda: None,
    on_outcome: Callable[[Outcome], None] = lambda outcome: None,
) -> list[Outcome]:
    """Run the selected deployments in the file's order; returns what happened to each, and tells
    `on_outcome` as each repeat ends or is skipped.

    `force` redoes deployments that finished (in new runs)."""
    results = results or campaign.campaign.results
    selected = campaign.select(names or [])
    preflight(campaign, selected)
    path = state_path(campaign, results)
    write_json_atomic(path.with_suffix(".json"), campaign_record(campaign))
    outcomes: list[Outcome] = []
    for work in pending(campaign, results, selected, force, on_status):
        if isinstance(work, Outcome):
            outcomes.append(work)
            on_outcome(work)
            continue
        deployment, repeat, resume = work
        outcomes.append(
            run_deployment(
                campaign,
                deployment,
                results,
                lambda line: append_line(path, line),
                resume,
                on_status,
                on_request_done,
                repeat,
            )
        )
        on_outcome(outcomes[-1])
    return outcomes


def failure_lines(name: str, exc: CtxbenchError) -> str:
    """`NAME: FAILED: <first line>`, then an engine's own last log lines (why it would not start)."""
    lines = [f"{name}: FAILED: {str(exc).splitlines()[0]}"]
    engine_lines = getattr(exc, "engine_lines", ())
    if engine_lines:
        lines += ["  the engine's last lines:", *(f"    {line}" for line in engine_lines)]
    return "\n".join(lines)


Work = tuple[Deployment, int, Path | None]  # a deployment, its repeat, the run directory it resumes


def pending(
    campaign: Campaign,
    results: Path,
    selected: list[Deployment],
    force: bool,
    on_status: Callable[[str], None],
) -> list[Outcome | Work]:
    """In the file's order, each deployment and repeat: skipped (finished earlier, unless `force`), or to run,
    resuming its interrupted run directory when the state file names one."""
    state = read_state(state_path(campaign, results))
    repeats = campaign.campaign.repeats
    out: list[Outcome | Work] = []
    for deployment in selected:
        for repeat in range(1, repeats + 1):
            previous = state.get(state_key(deployment.name, repeat), {})
            label = deployment.name + (f" (repeat {repeat}/{repeats})" if repeats > 1 else "")
            if previous.get("status") == "done" and not force:
                on_status(
                    f"{label}: finished earlier in run {previous['run_id']}; skipped (--force redoes it)"
                )
                out.append(Outcome(deployment.name, "skipped", previous.get("run_id")))
                continue
            resume = None
            if previous.get("status") == "started" and previous.get("run_id"):
                candidate = results / "runs" / previous["run_id"]
                resume = candidate if (candidate / "manifest.json").exists() else None
            out.append((deployment, repeat, resume))
    return out


def run_deployment(
    campaign: Campaign,
    deployment: Deployment,
    results: Path,
    write_state: Callable[[str], None],
    resume: Path | None,
    on_status: Callable[[str], None],
    on_request_done: Callable[[], None],
    repeat: int = 1,
    *,
    placement: dict[str, object] | None = None,
    on_run: Callable[[RunDir], None] = lambda run: None,
) -> Outcome:
    """One deployment (one repeat): start it, run its checks, stop it; its state lines go to `write_state`.
    `placement` (where a cluster ran it) goes into the manifest; `on_run` is given the run directory."""
    run_id: str | None = resume.name if resume else None
    try:
        plan = plan_deployment(deployment)
        checks = campaign.checks_for(deployment)

        def started(run: RunDir) -> None:
            nonlocal run_id
            run_id = run.run_id
            write_state(state_line(deployment.name, "started", run.run_id, repeat=repeat))
            on_run(run)

        if resume is not None:
            on_status(f"{deployment.name}: resuming run {resume.name}")
        run = run_suite(
            plan,
            counter_for(deployment, plan.model),
            checks,
            results,
            deployment=deployment.name,
            campaign=campaign.campaign.name,
            note=deployment.note,
            random_weights=deployment.random_weights,
            extra_manifest={
                "campaign_file_deployment": {
                    **deployment.model_dump(mode="json"),
                    "env": redact_env(deployment.env),
                },
                "price_per_gpu_hour": campaign.campaign.price_per_gpu_hour,
                "repeats": campaign.campaign.repeats,
                **({"placement": placement} if placement else {}),
            },
            on_status=on_status,
            on_request_done=on_request_done,
            resume=resume,
            on_run=started,
            repeat=repeat,
            telemetry_interval_s=campaign.campaign.gpu_telemetry_interval_s,
        )
    except CtxbenchError as exc:
        write_state(state_line(deployment.name, "failed", run_id, str(exc)[-4000:], repeat=repeat))
        on_status(failure_lines(deployment.name, exc))
        return Outcome(deployment.name, "failed", run_id, str(exc), exc.exit_code)
    write_state(state_line(deployment.name, "done", run.run_id, repeat=repeat))
    return Outcome(deployment.name, "done", run.run_id)
