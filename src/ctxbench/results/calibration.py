"""The planner against a measurement: measured prefills fix the engine's speed, and the planner's
predictions for every other prefill of the runs are set beside what was measured.

A run's prefills are read from its records: every request whose prefill (send -> first token) ran
alone, no other request of the run in flight meanwhile, so a second user's work is not counted as
this one's. A prefill's time is the engine's own where the record has it (llama.cpp's `timings.prompt_ms`),
else the TTFT: llama.cpp's TTFT also holds work that is not the prefill (tokenizing, and saving the idle
slot's previous prompt into its host-RAM prompt cache: 3.2 s after a 1M-token prompt on an H200). Two models:
- one point: time = FLOPs / (tflops x efficiency), efficiency = (FLOPs / tflops) / measured at the point;
- two points (the default: the run's shortest and longest solo prefills): time = FLOPs / (tflops x
  efficiency) + new tokens x per-token cost, both solved from the two points. The per-token cost is the
  engine's work that does not grow with context (llama.cpp: about 7 us a token on an H200, its host-side
  work per 512-token micro-batch), which a FLOPs count misses and which dominates short prefills.
FLOPs are `plan.prefill_flops` (new tokens over the cached ones). The KV memory the planner predicts for the
deployment (bytes a token x the server's whole context) is set beside the engine's own statement in its log
and beside the GPU memory sampled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..checks.catalog import CHECKS_BY_NAME
from ..errors import CalibrationError
from ..measure import metrics
from ..measure.telemetry import TELEMETRY_FILE, read_telemetry
from ..plan import DenseShape, predicted_prefill_s
from ..records import RequestRecord
from ..store.run_dir import RunDir

# llama.cpp: "llama_kv_cache:      CUDA0 KV buffer size =  8200.00 MiB" (one line per device buffer)
_KV_BUFFER = re.compile(r"KV buffer size\s*=\s*([0-9.]+)\s*MiB")


@dataclass(frozen=True)
class Prefill:
    """One measured prefill that ran alone."""

    request_id: str
    label: str
    context_tokens: int
    new_tokens: int
    measured_s: float
    ttft_s: float
    source: str = "ttft"  # or "engine": the server's own prompt time

    @property
    def cached_tokens(self) -> int:
        return self.context_tokens - self.new_tokens


@dataclass(frozen=True)
class Prediction:
    prefill: Prefill
    predicted_s: float

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.prefill.measured_s) / self.prefill.measured_s


@dataclass(frozen=True)
class Calibration:
    shape: DenseShape
    tflops: float
    points: tuple[Prefill, ...]
    efficiency: float
    per_token_s: float
    predictions: list[Prediction]
    kv_predicted_bytes: float | None
    kv_engine_bytes: float | None
    gpu_memory_peak_bytes: int | None
    context_tokens: int | None

    @property
    def worst_error(self) -> float:
        return max((abs(p.error) for p in self.predictions if p.prefill not in self.points), default=0.0)


def label_of(record: RequestRecord) -> str:
    """The request in a few words, as its check says it (`Check.label`)."""
    check = CHECKS_BY_NAME.get(record.check or "")
    return check.label(record.labels) if check is not None else record.check or "?"


def solo_prefills(records: Sequence[RequestRecord], min_new_tokens: int = 1024) -> list[Prefill]:
    """Prefills of at least `min_new_tokens` new tokens during which no other request was in flight."""
    spans = [(r.sent_ns, r.end_ns, r.request_id) for r in records]
    found = []
    for record in records:
        ttft = metrics.ttft_s(record)
        context = metrics.prompt_tokens(record)
        if ttft is None or context is None or not record.ok:
            continue
        new = context - (metrics.cached_tokens(record) or 0)
        first_ns = record.sent_ns + int(ttft * 1e9)
        crowded = any(
            start < first_ns and end > record.sent_ns and rid != record.request_id
            for start, end, rid in spans
        )
        if new >= min_new_tokens and not crowded:
            engine_s = engine_prefill_s(record, new)
            found.append(
                Prefill(
                    record.request_id,
                    label_of(record),
                    context,
                    new,
                    ttft if engine_s is None else engine_s,
                    ttft,
                    "ttft" if engine_s is None else "engine",
                )
            )
    return found


def engine_prefill_s(record: RequestRecord, new_tokens: int) -> float | None:
    """The server's own time for this prefill (`metrics.engine_prompt_s`), when it prefilled the same new
    tokens."""
    same = (record.server_timings or {}).get("prompt_n") == new_tokens
    return metrics.engine_prompt_s(record) if same else None


def engine_kv_bytes(run: RunDir) -> float | None:
    """The KV cache the engine said it allocated (llama.cpp's log), summed over its device buffers."""
    log = run.path / "server.log"
    if not log.exists():
        return None
    sizes = [float(m.group(1)) for m in _KV_BUFFER.finditer(log.read_text(errors="replace"))]
    return sum(sizes) * 2**20 if sizes else None


def calibrate(
    runs: Sequence[RunDir],
    *,
    tflops: float,
    points: Sequence[str] = (),
    shape: DenseShape | None = None,
    kv_bytes_per_value: float = 2.0,
) -> Calibration:
    """Calibrate on `points` (one or two request ids; default: the shortest and the longest solo prefill by
    FLOPs) and predict every solo prefill of `runs` (runs of one deployment: the first one's manifest gives
    the shape and the KV figures)."""
    if not runs:
        raise CalibrationError("no run directory given")
    manifest = runs[0].manifest()
    shape = shape or manifest.dense_shape()
    prefills = [p for run in runs for p in solo_prefills(list(run.records()))]
    if not prefills:
        raise CalibrationError(
            f"{', '.join(str(r.path) for r in runs)}: no request's prefill ran alone; the "
            "planner needs a measured point"
        )

    def flops_s(p: Prefill) -> float:
        return predicted_prefill_s(shape, p.new_tokens, p.cached_tokens, tflops)

    if len(points) > 2:
        raise CalibrationError(f"{len(points)} calibration points given; the models take one or two")
    if points:
        by_id = {p.request_id: p for p in prefills}
        unknown = [point for point in points if point not in by_id]
        if unknown:
            raise CalibrationError(
                f"--point {unknown[0]!r} is not a solo prefill of these runs; use one of: " + ", ".join(by_id)
            )
        chosen = tuple(by_id[point] for point in points)
    else:
        ordered = sorted(prefills, key=flops_s)
        chosen = (ordered[0], ordered[-1]) if len(ordered) > 1 else (ordered[0],)
    if len(chosen) == 1 or chosen[0].new_tokens * flops_s(chosen[1]) == chosen[1].new_tokens * flops_s(
        chosen[0]
    ):
        efficiency, per_token = flops_s(chosen[0]) / chosen[0].measured_s, 0.0
        chosen = chosen[:1]
    else:
        # measured = a x flops_s + b x new tokens at both points: a = 1 / efficiency, b = per-token cost
        (f1, n1, t1), (f2, n2, t2) = ((flops_s(p), p.new_tokens, p.measured_s) for p in chosen)
        determinant = f1 * n2 - f2 * n1
        a, per_token = (t1 * n2 - t2 * n1) / determinant, (f1 * t2 - f2 * t1) / determinant
        if a <= 0 or per_token < 0:
            raise CalibrationError(
                f"the points {chosen[0].request_id} and {chosen[1].request_id} give a negative "
                "rate or per-token cost; pick two prefills farther apart in length with --point"
            )
        efficiency = 1 / a
    predictions = [Prediction(p, flops_s(p) / efficiency + per_token * p.new_tokens) for p in prefills]
    slot = manifest.engine.context_limit_per_slot
    deployment = manifest.campaign_file_deployment or {}
    total = deployment.get("ctx_size") or (slot * deployment.get("parallel", 1) if slot else None)
    telemetry = read_telemetry(runs[0].path / TELEMETRY_FILE)
    peak = max((s.memory_used_bytes or 0 for s in telemetry.samples), default=None) if telemetry else None
    return Calibration(
        shape,
        tflops,
        chosen,
        efficiency,
        per_token,
        predictions,
        shape.kv_bytes_per_token(kv_bytes_per_value) * total if total else None,
        engine_kv_bytes(runs[0]),
        peak or None,
        total,
    )


def calibration_table(calibration: Calibration) -> list[str]:
    """Markdown: every solo prefill, predicted against measured, the calibration point marked."""
    c = calibration
    on = " and ".join(f"`{p.request_id}` ({p.label})" for p in c.points)
    lines = [
        f"Calibrated on {on}: the FLOPs ran at {c.efficiency:.3f} of {c.tflops:.0f} TFLOP/s "
        f"({c.efficiency * c.tflops:.0f} TFLOP/s effective)"
        + (f", plus {c.per_token_s * 1e6:.2f} us a new token." if len(c.points) == 2 else "."),
        "",
        "| prefill | context | new tokens | TTFT s | measured prefill s | predicted s | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in sorted(c.predictions, key=lambda p: (p.prefill.label.split()[0], p.prefill.context_tokens)):
        mark = " (calibration point)" if p.prefill in c.points else ""
        source = "" if p.prefill.source == "engine" else " (TTFT)"
        lines.append(
            f"| {p.prefill.label}{mark} | {p.prefill.context_tokens} | {p.prefill.new_tokens} "
            f"| {p.prefill.ttft_s:.2f} | {p.prefill.measured_s:.2f}{source} | {p.predicted_s:.2f} "
            f"| {p.error:+.1%} |"
        )
    from_engine = sum(p.prefill.source == "engine" for p in c.predictions)
    lines += [
        "",
        f"Measured prefill: the engine's own prompt time ({from_engine} of {len(c.predictions)} prefills), "
        "else the TTFT, marked. Worst prediction error (calibration points excluded): "
        f"{c.worst_error:.1%}.",
    ]
    if c.kv_predicted_bytes is not None:
        engine = "not in the log" if c.kv_engine_bytes is None else f"{c.kv_engine_bytes / 2**30:.2f} GiB"
        error = (
            ""
            if c.kv_engine_bytes is None
            else f" ({(c.kv_predicted_bytes - c.kv_engine_bytes) / c.kv_engine_bytes:+.1%})"
        )
        peak = (
            ""
            if c.gpu_memory_peak_bytes is None
            else (f"; peak GPU memory sampled during the run {c.gpu_memory_peak_bytes / 2**30:.2f} GiB")
        )
        lines += [
            "",
            f"KV cache for the server's {c.context_tokens} tokens: predicted "
            f"{c.kv_predicted_bytes / 2**30:.2f} GiB, engine allocated {engine}{error}{peak}.",
        ]
    return lines
