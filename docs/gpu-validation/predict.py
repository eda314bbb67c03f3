"""Measured prefill against the FLOPs estimate of `ctxbench.plan` at the GPU's measured matmul rate.

    .venv/bin/python docs/gpu-validation/predict.py docs/gpu-validation/h200-run2

Reads the results directory alone: gpu.json (bf16 matmul TFLOP/s measured in the same call, and the
model shape), capacity.json, needle.json and ramp1m.csv. Prints one row per fresh prompt and per
single-user ramp turn. TTFT holds the prefill plus one decode step and the HTTP round trip.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from ctxbench.plan import DenseShape, predicted_prefill_s


def main() -> None:
    results = Path(sys.argv[1])
    gpu = json.loads((results / "gpu.json").read_text())
    spec = gpu["model_spec"]
    shape = DenseShape(n_layer=spec["n_layer"], n_embd=spec["n_embd"], n_head=spec["n_head"],
                       n_head_kv=spec["n_head_kv"], head_dim=spec["n_embd"] // spec["n_head"], n_ff=spec["n_ff"])
    tflops = gpu["bf16_matmul_tflops"]
    rows: list[tuple[str, int, int, float]] = []
    (run,) = sorted((results / "runs").iterdir())
    capacity = json.loads((run / "capacity.json").read_text())
    rows.append(("capacity", capacity["prompt_tokens"], 0, capacity["prefill_s"]))
    for trial in json.loads((run / "needle.json").read_text())["trials"]:
        rows.append((f"needle d={trial['depth']}", trial["prompt_tokens"], trial["cached_tokens"] or 0, trial["ttft_s"]))
    with (results / "ramp1m.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["users"] == "1" and row["ttft_s"]:
                rows.append((f"ramp turn {row['turn']}", int(row["context_tokens"]), int(row["cached_tokens"]),
                             float(row["ttft_s"])))
    print(f"model: {shape.linear_params / 1e6:.0f}M linear params, {shape.n_layer} layers; "
          f"GPU bf16 matmul {tflops:.0f} TFLOP/s (measured in the same call)")
    print(f"{'prompt':<16}{'context':>9}{'new':>9}{'TTFT s':>9}{'FLOPs est s':>13}{'measured/est':>14}")
    for name, context, cached, ttft in rows:
        estimate = predicted_prefill_s(shape, context - cached, cached, tflops)
        print(f"{name:<16}{context:>9}{context - cached:>9}{ttft:>9.2f}{estimate:>13.2f}{ttft / estimate:>13.1f}x")


if __name__ == "__main__":
    main()
