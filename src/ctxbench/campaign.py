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

from .config import (
    BUILTIN_MODELS,
    Campaign,
    CampaignFileError,
    Deployment,
    ExternalDeployment,
    LlamaCppDeployment,
)
from .engines.deployment import plan_deployment
from .errors import CtxbenchError
from .params import Checks
from .results.store import RunDir, redact_env, safe_name, write_json_atomic
from .suite import run_suite
from .text.tokens import SERVER, TokenCounter, load_token_counter

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


def counter_source(deployment: Deployment, model: str) -> tuple[Path | str | None, Path | None]:
    """(tokenizer, gguf) for `load_token_counter`: what the deployment names, else what its model holds."""
    tokenizer: Path | str | None = deployment.tokenizer
    gguf = None
    if tokenizer is None and not isinstance(deployment, ExternalDeployment):
        path = Path(model)
        if path.suffix == ".gguf":
            gguf = path
        elif (path / "tokenizer.json").exists():
            tokenizer = path
    return tokenizer, gguf


def slot_tokens(deployment: Deployment) -> int | None:
    """The tokens one request may hold, where the deployment's file says (llama.cpp's ctx_size / parallel,
    vLLM's --max-model-len, SGLang's --context-length); None when only the running server can tell."""
    if isinstance(deployment, LlamaCppDeployment):
        return deployment.ctx_size // deployment.parallel
    flag = {"vllm": "--max-model-len", "sglang": "--context-length"}.get(deployment.engine)
    for index, part in enumerate(deployment.args):
        value = part.split("=", 1)[1] if flag and part.startswith(flag + "=") else None
        if flag and part == flag and index + 1 < len(deployment.args):
            value = deployment.args[index + 1]
        if value is not None and value.isdigit():
            return int(value)
    return None


def fit_warnings(deployment: Deployment, checks: Checks) -> list[str]:
    """Prompts that will not fit a request's slot with their output: skipped (needle) or failed (ramp)."""
    slot = slot_tokens(deployment)
    if slot is None:
        return []
    warnings = []
    needle = checks.needle
    if needle is not None:
        control = needle.control_length()
        for length in [*([control] if control else []), *needle.lengths]:
            if length + needle.max_tokens > slot:
                warnings.append(
                    f"needle length {length} + {needle.max_tokens} output tokens does not fit the "
                    f"{slot}-token slot: it will be skipped (a shorter length, or a larger context per slot)"
                )
    ramp = checks.ramp
    if ramp is not None and ramp.end + ramp.max_tokens > slot:
        warnings.append(
            f"ramp end {ramp.end} + {ramp.max_tokens} output tokens does not fit the {slot}-token slot: its "
            "last turns will be refused"
        )
    return warnings


def describe_counter(deployment: Deployment, model: str) -> str:
    """Where a deployment's token counts will come from, the local ones read now (a dry run's check)."""
    tokenizer, gguf = counter_source(deployment, model)
    if (tokenizer is None and gguf is None) or str(tokenizer) == SERVER:
        chosen = "chosen" if tokenizer is not None else "nothing local named"
        return f"the server's own /tokenize ({chosen}), reached once the server is up"
    if gguf is not None and not gguf.exists():
        builtin = getattr(deployment, "model", None) in BUILTIN_MODELS
        return f"the vocabulary in {gguf}" + (" (written with the model)" if builtin else " (MISSING)")
    try:
        counter = load_token_counter(tokenizer, gguf, None, deployment.served)
    except CtxbenchError as exc:
        return f"CANNOT BE READ: {exc}"
    counter.close()
    return f"{counter.source} (read)"


def available_gpus() -> int | None:
    """GPUs this machine shows (NVML), or None when that cannot be known."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library or no driver
        return 0 if not Path("/dev/nvidiactl").exists() else None


def check_gpus(campaign: Campaign, deployments: list[Deployment], present: int | None) -> None:
    """Every GPU index a launched deployment names must exist on this machine."""
    if present is None:
        return
    for deployment in deployments:
        if isinstance(deployment, ExternalDeployment):
            continue
        missing = [g for g in deployment.gpus if g >= present]
        if missing:
            index = campaign.deployments.index(deployment)
            raise CampaignFileError(
                f"deployments[{index}].gpus ({deployment.name}): GPU {missing[0]} is not present; this "
                f"machine shows {present} GPU(s) (indices 0..{present - 1})"
                if present
                else f"deployments[{index}].gpus ({deployment.name}): GPU {missing[0]} is not present; "
                "this machine shows no NVIDIA GPU. Remove `gpus` to run on the CPU, or run on the GPU node."
            )


def dry_run(campaign: Campaign, names: list[str], results: Path | None = None) -> list[str]:
    """The plan, line by line: each deployment's exact commands, token counter and checks; nothing is
    started or written. `results`: the directory the run will use (default: the file's)."""
    lines = [
        f"campaign {campaign.campaign.name}: price ${campaign.campaign.price_per_gpu_hour:.2f}/GPU-hour, "
        f"results in {results or campaign.campaign.results}"
    ]
    selected = campaign.select(names)
    present = available_gpus() if any(d.gpus for d in selected) else None
    for deployment in selected:
        plan = plan_deployment(deployment, resolve=False)
        checks = campaign.checks_for(deployment)
        ran = [name for name, spec in checks.model_dump().items() if spec is not None]
        model = getattr(deployment, "model", None)
        missing = (
            model is not None
            and model not in BUILTIN_MODELS
            and not isinstance(deployment, ExternalDeployment)
            and not Path(model).expanduser().exists()
        )
        lines.append(
            f"\n[{deployment.name}] engine {deployment.engine}, {len(plan.specs) or len(plan.urls)} "
            f"replica(s), GPUs {[list(g) for g in plan.replica_gpus]}, model {plan.model}"
            + (" (MISSING on this machine)" if missing else "")
        )
        for index, command in enumerate(plan.commands()):
            lines.append(f"  replica {index}: {command}")
        lines.append(f"  tokenizer: {describe_counter(deployment, plan.model)}")
        lines.append(f"  checks: {', '.join(ran) or 'none'}")
        parameters = checks.model_dump(mode="json")  # paths as text (the trace's file)
        for name in ran:
            lines.append(f"    {name}: {json.dumps(parameters[name])}")
        lines += [f"  warning: {warning}" for warning in fit_warnings(deployment, checks)]
        try:
            check_gpus(campaign, [deployment], present)
        except CampaignFileError as exc:
            lines.append(f"  warning: {exc} (a run refuses it)")
    for pair in campaign.compare:
        lines.append(f"\ncompare {pair.a} with {pair.b}" + (f": {pair.question}" if pair.question else ""))
    return lines


def run_campaign(
    campaign: Campaign,
    *,
    results: Path | None = None,
    names: list[str] | None = None,
    force: bool = False,
    on_status: Callable[[str], None] = lambda message: None,
    on_request_done: Callable[[], None] = lambda: None,
) -> list[Outcome]:
    """Run the selected deployments in the file's order; returns what happened to each.

    `force` redoes deployments that finished (in new runs)."""
    results = results or campaign.campaign.results
    selected = campaign.select(names or [])
    if any(d.gpus for d in selected):
        check_gpus(campaign, selected, available_gpus())
    path = state_path(campaign, results)
    write_json_atomic(path.with_suffix(".json"), campaign_record(campaign))
    outcomes: list[Outcome] = []
    for work in pending(campaign, results, selected, force, on_status):
        if isinstance(work, Outcome):
            outcomes.append(work)
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
    return outcomes


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
        on_status(f"{deployment.name}: FAILED: {str(exc).splitlines()[0]}")
        return Outcome(deployment.name, "failed", run_id, str(exc), exc.exit_code)
    write_state(state_line(deployment.name, "done", run.run_id, repeat=repeat))
    return Outcome(deployment.name, "done", run.run_id)
