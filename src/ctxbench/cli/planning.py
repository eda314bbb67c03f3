"""Before and around a run: plan (with --calibrate), inspect-checkpoint, topology."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from ..config.deployments import DEFAULT_PRICE_PER_GPU_HOUR
from ..errors import UsageError, validation_message
from ..plan import Forecast
from ..store.run_dir import RunDir
from .common import app, console, parse_token_count


def parse_bytes(text: str, flag: str | None = None) -> float:
    """`141GB`, `80GiB`, `1.5TB` or `1000000B`. A bare number is refused: `80` meant as 80 GB would be read as
    80 bytes and plan nothing, silently."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)(i?)(B?)\s*", text, re.IGNORECASE)
    if not match:
        raise typer.BadParameter(f"{text!r} is not a size; write 141GB or 80GiB.", param_hint=flag)
    number, prefix, binary, unit = match.groups()
    if not prefix and not unit:
        raise typer.BadParameter(
            f"{text!r} has no unit: write {number}GB or {number}GiB (or {number}B for bytes).",
            param_hint=flag,
        )
    power = "KMGT".find(prefix.upper()) + 1 if prefix else 0
    return float(number) * (1024 if binary else 1000) ** power


@app.command()
def plan(
    config: Annotated[
        Path | None,
        typer.Option(
            help="The model's Hugging Face config.json (with --calibrate: "
            "default, the shape the run recorded)."
        ),
    ] = None,
    context: Annotated[str, typer.Option(help="Context each user holds (8K, 1M...).")] = "1M",
    users: Annotated[int, typer.Option(help="Concurrent users holding that context.", min=1)] = 1,
    gpus: Annotated[int, typer.Option(help="GPUs the deployment uses.", min=1)] = 1,
    gpu_memory: Annotated[str, typer.Option(help="Memory of one GPU (H200: 141GB).")] = "141GB",
    kv_dtype: Annotated[str, typer.Option(help="KV cache precision: bf16, fp16, fp8, q8_0, q4_0.")] = "bf16",
    weights_gb: Annotated[
        float | None,
        typer.Option(
            help="Weight bytes in GB (default: from --checkpoint, else 2 "
            "bytes a parameter of a dense model).",
            min=0.0,
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None, typer.Option(help="Read weight bytes from this checkpoint's headers.")
    ] = None,
    tflops: Annotated[
        float, typer.Option(help="Measured matmul rate of one GPU, TFLOP/s.", min=0.001)
    ] = 789.0,
    efficiency: Annotated[
        float, typer.Option(help="Measured fraction of that rate the engine reaches.", min=0.0001, max=1.0)
    ] = 1.0,
    decode_tokens_per_s: Annotated[
        float | None, typer.Option(help="Measured aggregate decode rate, for the cost per token.", min=0.001)
    ] = None,
    price: Annotated[float, typer.Option(help="Price per GPU-hour.", min=0.0)] = DEFAULT_PRICE_PER_GPU_HOUR,
    ramp: Annotated[
        str | None,
        typer.Option(
            help="START:END:TURNS (32K:1M:10): each geometric ramp turn's "
            "prefill, its new tokens over the turn before."
        ),
    ] = None,
    calibrate: Annotated[
        list[Path] | None,
        typer.Option(
            help="Run directories of one deployment (repeat the flag): "
            "two of their measured prefills set the speed; the "
            "others are predicted beside what was measured."
        ),
    ] = None,
    point: Annotated[
        list[str] | None,
        typer.Option(
            help="With --calibrate: the request id(s) to calibrate on, one "
            "(constant efficiency) or two (efficiency and a per-token "
            "cost); default: the shortest and longest solo prefills."
        ),
    ] = None,
) -> None:
    """Users x context: KV bytes a token (MHA/GQA/MLA, sliding windows, linear-attention layers), how many
    users fit beside the weights, when KV offload is needed, prefill time and cost per token."""
    from ..plan import BYTES_PER_VALUE, forecast

    if kv_dtype not in BYTES_PER_VALUE:
        raise typer.BadParameter(f"--kv-dtype {kv_dtype!r}: use one of {', '.join(BYTES_PER_VALUE)}.")
    if calibrate:
        efficiency = _calibrate(calibrate, config, tflops, point or [], BYTES_PER_VALUE[kv_dtype])
        if config is None:
            return
    if config is None:
        raise typer.BadParameter(
            "--config is required (the model's config.json), unless --calibrate is given."
        )
    tokens = parse_token_count(context, "--context")
    memory = parse_bytes(gpu_memory, "--gpu-memory")
    weights = weights_gb * 1e9 if weights_gb is not None else None
    if weights is None and checkpoint is not None:
        from ..audits.checkpoint import inspect, load_checkpoint

        weights = float(sum(nbytes for _, nbytes in inspect(load_checkpoint(checkpoint)).by_dtype.values()))
    try:
        found = forecast(
            json.loads(config.read_text()),
            tokens=tokens,
            users=users,
            gpus=gpus,
            gpu_memory_bytes=memory,
            kv_dtype=kv_dtype,
            tflops=tflops,
            price_per_gpu_hour=price,
            weight_bytes=weights,
            efficiency=efficiency,
            decode_tokens_per_s=decode_tokens_per_s,
        )
    except KeyError as exc:
        raise typer.BadParameter(
            f"{config}: no {exc.args[0]!r} key; give the model's Hugging Face config.json (a transformer's, "
            "with num_hidden_layers, hidden_size and num_attention_heads)."
        ) from None
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{config}: not a readable transformer config.json ({exc}).") from None
    _print_forecast(found, ramp)


def _print_forecast(found: Forecast, ramp: str | None) -> None:
    """The forecast as `ctxbench plan` prints it, with each ramp turn's prefill (`--ramp`) before the cost."""
    layout, tokens, users = found.layout, found.tokens, found.users
    per_user, weights, gpus = found.kv_per_user_bytes, found.weight_bytes, found.gpus
    console.print(
        f"KV cache ({layout.kind}, {found.kv_dtype}): {layout.bytes_at(1) / 1024:.1f} KiB a token"
        + (
            f" over {layout.full_layers} full-context layers"
            if layout.window_layers or "linear" in layout.kind
            else ""
        )
        + f"; {per_user / 2**30:.1f} GiB for one user at {tokens} tokens, "
        f"{per_user * users / 2**30:.1f} GiB for {users} user(s)",
        highlight=False,
    )
    if weights is None:
        console.print(
            "weights: give --weights-gb (mixture-of-experts sizes are not estimated)", highlight=False
        )
    else:
        console.print(
            f"weights {weights / 1e9:.1f} GB on {gpus} x {found.gpu_memory_bytes / 1e9:.0f} GB "
            "(10% reserved): "
            f"{found.users_fit} user(s) fit at {tokens} tokens"
            + (f"; {users} need KV offload or more GPUs" if found.offload_needed else ""),
            highlight=False,
        )
    if found.prefill_s is not None:
        console.print(
            f"prefill of {tokens} tokens: {found.prefill_s:.1f} s "
            f"at {found.tflops:.0f} TFLOP/s (a lower bound at efficiency {found.efficiency})",
            highlight=False,
        )
    if found.shape is not None and ramp is not None:
        _print_ramp_prefills(found.shape, ramp, found.tflops)
    if found.cost_per_million_output is not None:
        console.print(
            f"cost: ${found.cost_per_million_output:.2f} per million output tokens at "
            f"{found.decode_tokens_per_s:.0f} tokens/s on {gpus} GPU(s) at "
            f"${found.price_per_gpu_hour:.2f}/GPU-hour",
            highlight=False,
        )


def _calibrate(
    run_dirs: list[Path], config: Path | None, tflops: float, points: list[str], kv_value: float
) -> float:
    """Print the calibration table of the runs; return the efficiency they measured."""
    from ..plan import DenseShape
    from ..results.calibration import CalibrationError, calibrate, calibration_table

    for run_dir in run_dirs:
        if not (run_dir / "manifest.json").exists():
            raise typer.BadParameter(
                f"--calibrate {run_dir}: not a run directory (no manifest.json); give results/runs/<run_id>."
            )
    shape = None
    if config is not None:
        try:
            shape = DenseShape.from_hf_config(json.loads(config.read_text()))
        except (OSError, ValueError, KeyError) as exc:
            raise typer.BadParameter(
                f"--config {config}: not a readable dense config.json ({exc!r})"
            ) from None
    try:
        result = calibrate(
            [RunDir(d) for d in run_dirs],
            tflops=tflops,
            points=points,
            shape=shape,
            kv_bytes_per_value=kv_value,
        )
    except CalibrationError as exc:
        raise typer.BadParameter(f"--calibrate: {exc}") from None
    console.print("\n".join(calibration_table(result)), highlight=False, markup=False)
    return result.efficiency


def _print_ramp_prefills(shape, ramp: str, tflops: float) -> None:
    from pydantic import ValidationError

    from ..checks.ramp import RampParams, ramp_schedule
    from ..plan import predicted_prefill_s

    usage = f"--ramp {ramp!r}: write START:END:TURNS, e.g. 32K:1M:10"
    try:
        start, end, turns = ramp.split(":")
        schedule = ramp_schedule(RampParams(start=start, end=end, turns=turns))
    except ValidationError as exc:
        raise typer.BadParameter(
            f"{usage} ({'; '.join(validation_message(e['msg']) for e in exc.errors())})"
        ) from None
    except ValueError as exc:
        raise typer.BadParameter(f"{usage} ({exc})") from None
    console.print(f"ramp {ramp}, each turn's prefill at {tflops:.0f} TFLOP/s:", highlight=False)
    previous = 0
    for turn, target in enumerate(schedule, start=1):
        seconds = predicted_prefill_s(shape, target - previous, previous, tflops)
        console.print(
            f"  turn {turn:>2}: {target:>9} tokens, {target - previous:>8} new: {seconds:8.2f} s",
            highlight=False,
        )
        previous = target


@app.command("inspect-checkpoint")
def inspect_checkpoint(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Model directories, .safetensors files, or hf://org/name "
            "(needs huggingface-hub and network); two or more compare."
        ),
    ],
) -> None:
    """What the weights really are, from safetensors headers alone: dtypes, scales, scheme, label check."""
    from ..audits.checkpoint import compare, inspect, load_checkpoint, load_remote

    reports = []
    for path in paths:
        remote = path.startswith("hf://")
        report = inspect(load_remote(path.removeprefix("hf://")) if remote else load_checkpoint(Path(path)))
        reports.append(report)
        table = Table("dtype", "parameters", "GB", title=f"{path} (label: {report.label or 'none'})")
        for dtype, (params, nbytes) in report.by_dtype.items():
            table.add_row(dtype, f"{params:,}", f"{nbytes / 1e9:.3f}")
        console.print(table)
        for scheme, count in sorted(report.schemes.items(), key=lambda item: -item[1]):
            console.print(f"  {count} weights: {scheme}", highlight=False)
        if report.unquantized:
            shown = ", ".join(report.unquantized[:6]) + (" ..." if len(report.unquantized) > 6 else "")
            console.print(f"  {len(report.unquantized)} 2-D weights unquantized: {shown}", highlight=False)
        if report.config_quantization:
            console.print(
                f"  config.json quantization_config: {json.dumps(report.config_quantization)}",
                highlight=False,
            )
        for warning in report.warnings:
            console.print(Text.assemble(("  warning:", "yellow"), f" {warning}"), highlight=False)
    for first, second in zip(reports, reports[1:], strict=False):
        console.print(f"{first.checkpoint} vs {second.checkpoint}: {compare(first, second)}", highlight=False)


@app.command()
def topology(
    from_file: Annotated[
        Path | None, typer.Option(help="Parse this saved `nvidia-smi topo -m` output instead.")
    ] = None,
    model_gb: Annotated[
        float | None, typer.Option(help="Model weights in GB, for layout advice.", min=0.0)
    ] = None,
    gpu_gb: Annotated[
        float | None, typer.Option(help="Memory of one GPU in GB (H200: 141).", min=0.001)
    ] = None,
) -> None:
    """Check the topology first: NVLink islands, PCIe/SYS paths, NUMA, IOMMU mode, and layout advice."""
    from ..audits.topology import advice, local_iommu_mode, parse_topo_matrix, read_topology

    try:
        found = parse_topo_matrix(from_file.read_text()) if from_file else read_topology()
    except OSError as exc:
        raise UsageError(f"cannot read {from_file} (--from-file): {exc.strerror}") from exc
    iommu = local_iommu_mode()
    table = Table("GPU", *found.gpus, "NUMA", title="links (nvidia-smi topo -m)")
    for row in found.gpus:
        table.add_row(
            row, *(found.links.get((row, col), "?") for col in found.gpus), found.numa.get(row, "?")
        )
    console.print(table)
    console.print(f"IOMMU: {iommu}" + (" (of this machine)" if from_file else ""), highlight=False)
    for note in advice(found, iommu, model_gb, gpu_gb):
        console.print(f"- {note}", highlight=False)
