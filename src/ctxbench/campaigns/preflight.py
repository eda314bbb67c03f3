"""What is known before anything starts: the dry run's plan, the token counter each deployment will use,
what does not fit its slot, and what a run refuses before any engine starts (GPUs this machine lacks, a
trace's bad line)."""

from __future__ import annotations

import json
from pathlib import Path

from ..checks.catalog import Checks
from ..checks.catalog import selected as selected_checks
from ..checks.needle import NEEDLE
from ..checks.prompts import QUESTIONS, read_prompt_file, read_prompts
from ..checks.ramp import RAMP
from ..checks.sessions import SESSIONS, check_fits, describe_trace
from ..checks.throughput import THROUGHPUT
from ..checks.trace import TRACE, read_trace
from ..config.deployments import BUILTIN_MODELS, Deployment, ExternalDeployment, LlamaCppDeployment
from ..engines.deployment import plan_deployment
from ..engines.kinds import engine
from ..errors import CampaignFileError, CtxbenchError, UsageError
from ..measure.slo_search import plan_text
from ..text.blocks import shortest_prompt
from ..text.tokens import SERVER, load_token_counter
from .campaign_file import Campaign


def counter_source(deployment: Deployment, model: str) -> tuple[Path | str | None, Path | None]:
    """(tokenizer, gguf) for `load_token_counter`: what the deployment names, else what its model holds."""
    tokenizer: Path | str | None = deployment.tokenizer
    gguf = None
    if tokenizer is not None and str(tokenizer).endswith(".gguf"):  # a GGUF's own vocabulary
        return None, Path(tokenizer)
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
    flag = engine(deployment.engine).context_flag
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
    needle = checks.of(NEEDLE)
    if needle is not None:
        control = needle.control_length()
        for length in [*([control] if control else []), *needle.lengths]:
            if length + needle.max_tokens > slot:
                warnings.append(
                    f"needle length {length} + {needle.max_tokens} output tokens does not fit the "
                    f"{slot}-token slot: it will be skipped (a shorter length, or a larger context per slot)"
                )
    ramp = checks.of(RAMP)
    if ramp is not None and ramp.end + ramp.max_tokens > slot:
        warnings.append(
            f"ramp end {ramp.end} + {ramp.max_tokens} output tokens does not fit the {slot}-token slot: its "
            "last turns will be refused"
        )
    sessions = checks.of(SESSIONS)
    if (
        sessions is not None
        and sessions.trace is None
        and sessions.longest_prompt() + sessions.max_tokens > slot
    ):
        warnings.append(
            f"sessions grow to about {sessions.longest_prompt()} tokens + {sessions.max_tokens} output "
            f"tokens, more than the {slot}-token slot: their last turns will be refused (set `context`, or "
            "fewer turns)"
        )
    trace = checks.of(TRACE)
    if trace is not None:
        try:
            lines = read_trace(trace.file, trace.max_requests)
        except CtxbenchError as exc:
            return [*warnings, f"{exc} (a run refuses it)"]
        over = [r for r in lines if r.input_length + r.output_length > slot]
        if over:
            warnings.append(
                f"{len(over)} of {len(lines)} trace requests ({trace.file}, first at line {over[0].line}) do "
                f"not fit the {slot}-token slot with their output: the server will refuse them"
            )
    return warnings


def short_trace_warnings(deployment: Deployment, model: str, checks: Checks) -> list[str]:
    """Trace lines asking for fewer tokens than the shortest prompt ctxbench builds (the chat template around
    the lead and the question), where the deployment's counter can be read here: they will be sent longer."""
    trace = checks.of(TRACE)
    tokenizer, gguf = counter_source(deployment, model)
    if trace is None or (tokenizer is None and gguf is None) or str(tokenizer) == SERVER:
        return []  # counted by the server once it is up: the run counts them (`lengthened_requests`)
    try:
        lines = read_trace(trace.file, trace.max_requests)
        counter = load_token_counter(tokenizer, gguf, None, deployment.served)
    except CtxbenchError:
        return []  # said elsewhere in the dry run: the trace's error, or the counter that cannot be read
    try:
        shortest = shortest_prompt(counter)
    finally:
        counter.close()
    short = [r for r in lines if r.input_length < shortest]
    if not short:
        return []
    return [
        f"{len(short)} of {len(lines)} trace requests ({trace.file}, first at line {short[0].line}) ask for "
        f"fewer than {shortest} tokens, the shortest prompt ctxbench builds with this template: they will be "
        "sent at that length (each record keeps the trace's length beside it; trace.json counts them)"
    ]


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


def _tokenizer_readable(deployment: Deployment, checks: Checks) -> None:
    """A `tokenizer` the deployment names, read now where a check counts tokens: one that cannot be read is
    refused before anything starts (the dry run exits 2), not found after the engine loaded."""
    named = deployment.tokenizer
    if named is None or str(named) == SERVER or not any(c.needs_counter for c, _ in selected_checks(checks)):
        return
    tokenizer, gguf = counter_source(deployment, getattr(deployment, "model", "") or "")
    try:
        load_token_counter(tokenizer, gguf, None, deployment.served).close()
    except CtxbenchError as exc:
        raise UsageError(
            f"deployment {deployment.name!r}: tokenizer {str(named)!r} cannot be read ({exc}); give a "
            'tokenizer directory, a tokenizer.json or a .gguf, or "server" to count with its /tokenize'
        ) from None


def preflight(campaign: Campaign, selected: list[Deployment]) -> None:
    """What can be refused before any engine starts, beyond the file's own keys and paths: GPUs this
    machine lacks and every line of each trace (a bad line found after a 1M-token prefill wastes it)."""
    if any(d.gpus for d in selected):
        check_gpus(campaign, selected, available_gpus())
    read: set[tuple[Path, int | None]] = set()
    for deployment in selected:
        checks = campaign.checks_for(deployment)
        _tokenizer_readable(deployment, checks)
        trace = checks.of(TRACE)
        if trace is not None and (trace.file, trace.max_requests) not in read:
            read_trace(trace.file, trace.max_requests)
            read.add((trace.file, trace.max_requests))
        throughput = checks.of(THROUGHPUT)
        if throughput is not None and throughput.source not in QUESTIONS:
            read_prompts(Path(throughput.source))  # a bad line named now, not after the engine started
        sessions = checks.of(SESSIONS)
        if sessions is not None:
            describe_trace(sessions)  # every line of its trace read and checked, as its run reads them
            slot = slot_tokens(deployment)
            if slot is not None:
                check_fits(sessions, slot, deployment.name)


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
        warnings = fit_warnings(deployment, checks) + short_trace_warnings(deployment, plan.model, checks)
        lines += [f"  warning: {warning}" for warning in warnings]
        throughput = checks.of(THROUGHPUT)
        lines += [f"  slo: {line}" for line in (plan_text(throughput) if throughput is not None else [])]
        sessions = checks.of(SESSIONS)
        try:
            holds = describe_trace(sessions) if sessions is not None else None
            lines += [f"  sessions trace: {holds}"] if holds else []
        except CtxbenchError as exc:
            lines.append(f"  warning: {exc} (a run refuses it)")
        if throughput is not None and throughput.source not in QUESTIONS:
            try:
                lines.append(
                    f"  prompts: {read_prompt_file(Path(throughput.source)).text(throughput.source)}"
                )
            except CtxbenchError as exc:
                lines.append(f"  warning: {exc} (a run refuses it)")
        try:
            check_gpus(campaign, [deployment], present)
        except CampaignFileError as exc:
            lines.append(f"  warning: {exc} (a run refuses it)")
    for pair in campaign.compare:
        lines.append(f"\ncompare {pair.a} with {pair.b}" + (f": {pair.question}" if pair.question else ""))
    return lines
