"""The planner against a measurement: one measured prefill fixes the engine's efficiency, and the
planner's predictions for every other prefill of the run are set beside what was measured.

A run's prefills are read from its records: every request whose prefill (send -> first token) ran
alone, no other request of the run in flight meanwhile, so a second user's work is not counted as
this one's. The prediction is `plan.predicted_prefill_s` (FLOPs of the new tokens over the cached
ones) at `tflops x efficiency`, where efficiency = predicted at full rate / measured, at the calibration
point. The KV memory the planner predicts for the deployment (bytes a token x the server's whole
context) is set beside the engine's own statement in its log and beside the GPU memory sampled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import metrics
from ..plan import DenseShape, predicted_prefill_s
from ..records import RequestRecord
from ..telemetry import TELEMETRY_FILE, read_telemetry
from .store import RunDir

# llama.cpp: "llama_kv_cache:      CUDA0 KV buffer size =  8200.00 MiB" (one line per device buffer)
_KV_BUFFER = re.compile(r"KV buffer size\s*=\s*([0-9.]+)\s*MiB")


class CalibrationError(ValueError):
    """A run that cannot calibrate the planner; the message says what is missing."""


@dataclass(frozen=True)
class Prefill:
    """One measured prefill that ran alone."""

    request_id: str
    label: str
    context_tokens: int
    new_tokens: int
    measured_s: float

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
    point: Prefill
    efficiency: float
    predictions: list[Prediction]
    kv_predicted_bytes: float | None
    kv_engine_bytes: float | None
    gpu_memory_peak_bytes: int | None
    context_tokens: int | None

    @property
    def worst_error(self) -> float:
        return max((abs(p.error) for p in self.predictions if p.prefill is not self.point), default=0.0)


def label_of(record: RequestRecord) -> str:
    labels = record.labels
    check = labels.get("check", "?")
    if check == "ramp":
        return f"ramp u{labels.get('users')} user {labels.get('user')} turn {labels.get('turn')}"
    if check == "needle":
        return f"needle {labels.get('length')} d={labels.get('depth')}"
    if check == "capacity":
        return f"capacity {labels.get('prompt', '')}".strip()
    return check


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
        crowded = any(start < first_ns and end > record.sent_ns and rid != record.request_id
                      for start, end, rid in spans)
        if new >= min_new_tokens and not crowded:
            found.append(Prefill(record.request_id, label_of(record), context, new, ttft))
    return found


def shape_of(manifest: dict[str, object]) -> DenseShape:
    shape = manifest.get("model_shape")
    if not isinstance(shape, dict):
        raise CalibrationError("the run's manifest.json has no model_shape (runs of ctxbench before this planner "
                               "calibration, or a model that is not a GGUF); give the model's config.json with --config")
    return DenseShape(n_layer=int(shape["n_layer"]), n_embd=int(shape["n_embd"]), n_head=int(shape["n_head"]),
                      n_head_kv=int(shape["n_head_kv"]), head_dim=int(shape["head_dim"]), n_ff=int(shape["n_ff"]))


def engine_kv_bytes(run: RunDir) -> float | None:
    """The KV cache the engine said it allocated (llama.cpp's log), summed over its device buffers."""
    log = run.path / "server.log"
    if not log.exists():
        return None
    sizes = [float(m.group(1)) for m in _KV_BUFFER.finditer(log.read_text(errors="replace"))]
    return sum(sizes) * 2**20 if sizes else None


def calibrate(run: RunDir, *, tflops: float, point: str | None = None, shape: DenseShape | None = None,
              kv_bytes_per_value: float = 2.0) -> Calibration:
    """Calibrate on the prefill `point` (a request id; default: the median of the solo prefills by FLOPs)
    and predict every other solo prefill of the run."""
    manifest = json.loads((run.path / "manifest.json").read_text())
    shape = shape or shape_of(manifest)
    prefills = solo_prefills(list(run.records()))
    if not prefills:
        raise CalibrationError(f"{run.path}: no request's prefill ran alone; the planner needs one measured point")
    if point is None:
        ordered = sorted(prefills, key=lambda p: predicted_prefill_s(shape, p.new_tokens, p.cached_tokens, tflops))
        chosen = ordered[(len(ordered) - 1) // 2]
    else:
        matches = [p for p in prefills if p.request_id == point]
        if not matches:
            known = ", ".join(p.request_id for p in prefills)
            raise CalibrationError(f"--point {point!r} is not a solo prefill of {run.path}; use one of: {known}")
        chosen = matches[0]
    efficiency = predicted_prefill_s(shape, chosen.new_tokens, chosen.cached_tokens, tflops) / chosen.measured_s
    predictions = [Prediction(p, predicted_prefill_s(shape, p.new_tokens, p.cached_tokens, tflops * efficiency))
                   for p in prefills]
    engine = manifest.get("engine") or {}
    slot = engine.get("context_limit_per_slot")
    deployment = manifest.get("campaign_file_deployment") or {}
    total = deployment.get("ctx_size") or (slot * deployment.get("parallel", 1) if slot else None)
    telemetry = read_telemetry(run.path / TELEMETRY_FILE)
    peak = max((s.memory_used_bytes or 0 for s in telemetry.samples), default=None) if telemetry else None
    return Calibration(shape, tflops, chosen, efficiency, predictions,
                       shape.kv_bytes_per_token(kv_bytes_per_value) * total if total else None,
                       engine_kv_bytes(run), peak or None, total)


def calibration_table(calibration: Calibration) -> list[str]:
    """Markdown: every solo prefill, predicted against measured, the calibration point marked."""
    c = calibration
    lines = [f"Calibrated on `{c.point.request_id}` ({c.point.label}): the engine ran at {c.efficiency:.3f} of "
             f"{c.tflops:.0f} TFLOP/s ({c.efficiency * c.tflops:.0f} TFLOP/s effective).", "",
             "| prefill | context | new tokens | measured s | predicted s | error |", "|---|---|---|---|---|---|"]
    for p in sorted(c.predictions, key=lambda p: (p.prefill.label.split()[0], p.prefill.context_tokens)):
        mark = " (calibration point)" if p.prefill is c.point else ""
        lines.append(f"| {p.prefill.label}{mark} | {p.prefill.context_tokens} | {p.prefill.new_tokens} "
                     f"| {p.prefill.measured_s:.2f} | {p.predicted_s:.2f} | {p.error:+.1%} |")
    lines += ["", f"Worst prediction error (calibration point excluded): {c.worst_error:.1%}."]
    if c.kv_predicted_bytes is not None:
        engine = "not in the log" if c.kv_engine_bytes is None else f"{c.kv_engine_bytes / 2**30:.2f} GiB"
        error = "" if c.kv_engine_bytes is None else f" ({(c.kv_predicted_bytes - c.kv_engine_bytes) / c.kv_engine_bytes:+.1%})"
        peak = "" if c.gpu_memory_peak_bytes is None else (
            f"; peak GPU memory sampled during the run {c.gpu_memory_peak_bytes / 2**30:.2f} GiB")
        lines += ["", f"KV cache for the server's {c.context_tokens} tokens: predicted "
                  f"{c.kv_predicted_bytes / 2**30:.2f} GiB, engine allocated {engine}{error}{peak}."]
    return lines
