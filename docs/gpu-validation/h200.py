"""GPU validation: ctxbench's checks against llama.cpp's CUDA server on one H200.

Run on the device (see README.md beside this file for the exact command):

    python3 docs/gpu-validation/h200.py --server BUILD/bin/llama-server --results OUT/results

It writes a random-weight llama model with ctxbench's own writer (16 layers, width 2048, 32 heads,
8 KV heads, head size 64, ctxbench's trained BPE vocabulary), serves it with `-fa on -ngl 99 -np 2`,
and runs the capacity check, the needle check and the conversation ramp with 1 and 2 users.
Random weights: recall is noise, and the report says so; speed and cache behaviour are real.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ctxbench.checks.capacity import CapacitySpec
from ctxbench.checks.ramp import RampSpec
from ctxbench.checks.needle import NeedleSpec
from ctxbench.checks.probe import ProbeSpec
from ctxbench.engines.llamacpp import LlamaServerConfig
from ctxbench.engines.models import TinyModelSpec, tiny_model
from ctxbench.campaigns.suite import Suite, run_suite
from ctxbench.text.tokens import HfTokenCounter

K = 1024


def matmul_tflops() -> float | None:
    """bf16 8192^3 matrix products on the GPU, the ceiling a prefill estimate is compared with."""
    try:
        import torch
    except ImportError:
        return None
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 10 * 2 * 8192**3 / (time.perf_counter() - start) / 1e12


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/ctxbench-h200-model"))
    parser.add_argument("--slot-tokens", type=int, default=256 * K)
    parser.add_argument("--ramp-end", type=int, default=256 * K)
    parser.add_argument("--ramp-turns", type=int, default=8)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--ffn", type=int, default=5632)
    parser.add_argument("--extra", default="-fa on -ngl 99", help="extra llama-server arguments")
    args = parser.parse_args()
    spec = TinyModelSpec(n_embd=args.width, n_head=args.width // 64, n_head_kv=max(1, args.width // 256),
                         n_layer=args.layers, n_ff=args.ffn, context_length=1048576)

    started = time.perf_counter()
    model = tiny_model(args.model_dir, spec)
    written_s = time.perf_counter() - started
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "gpu.json").write_text(json.dumps(
        {"bf16_matmul_tflops": matmul_tflops(), "model_spec": spec.__dict__, "model_write_s": round(written_s, 1),
         "model_bytes": model.gguf.stat().st_size}, indent=2))

    config = LlamaServerConfig(
        binary=args.server, model=model.gguf, ctx_size=2 * args.slot_tokens + 2 * 1024, parallel=2,
        alias="random-740m", extra_args=tuple(args.extra.split()), ready_timeout_s=300,
    )
    suite = Suite(
        probe=ProbeSpec(document_chars=0, max_tokens=64),
        capacity=CapacitySpec(output_tokens=16),
        needle=NeedleSpec(lengths=(args.slot_tokens // 8, args.slot_tokens // 2), max_tokens=16),
        ramp=RampSpec(start_tokens=args.ramp_end // 8, end_tokens=args.ramp_end, turns=args.ramp_turns, max_tokens=256,
                      users=(1, 2), stagger_s=2.0, sampling={"temperature": 0.0, "ignore_eos": True}),
    )
    run = run_suite(
        config, HfTokenCounter.from_path(model.tokenizer_dir), suite, args.results,
        deployment="random-740m-llamacpp-cuda-h200", campaign="gpu-validation",
        note="Random weights (ctxbench's writer): recall is noise, speed and cache behaviour are real. One H200.",
        gpus=1, random_weights=True, extra_manifest={"model_spec": spec.__dict__}, on_status=lambda m: print(m, flush=True),
        on_request_done=lambda: print(".", end="", flush=True),
    )
    print(f"\nrun {run.path} in {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
