"""What a busy host does to a CPU engine's own speed, by its thread count: llama-server with the tiny model,
`--threads` 1 and 2 (or `--threads`), `--requests` short requests one after another, each 256 prompt tokens
and 32 output tokens, with `--hogs` busy-loop processes beside it. Printed per thread count: the server's own
`timings` (prompt_ms and predicted_ms per request, p50 / p99 / max) and the client's TTFT; the server's own
numbers, so the client's scheduling is not in them.

llama.cpp's CPU backend runs each step on a thread pool whose threads wait for one another at every barrier
(spinning first, `--poll`): when a host has fewer free cores than pool threads, one descheduled thread holds
every other one up for a time slice. This measures how much.

    .venv/bin/python benchmarks/engine_threads.py [--threads 1,2] [--hogs 2] [--requests 40]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServer, LlamaServerConfig
from ctxbench.engines.models import tiny_model

WORDS = "river stone field light cold quiet table paper window garden number city".split()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def one_request(url: str, prompt: str) -> tuple[float, dict[str, float]]:
    body = json.dumps(
        {"prompt": prompt, "n_predict": 32, "ignore_eos": True, "cache_prompt": False, "stream": False}
    ).encode()
    request = urllib.request.Request(f"{url}/completion", body, {"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.load(response)
    return time.perf_counter() - started, answer["timings"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    model = tiny_model()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    print(
        f"tiny model, {args.requests} requests of 256 + 32 tokens one after another, {args.hogs} busy loop(s)"
    )
    print(
        f"{'threads':>7} {'prompt ms p50':>13} {'p99':>7} {'max':>7} "
        f"{'decode ms p50':>13} {'p99':>7} {'max':>7} {'wall s p50':>10} {'max':>7}"
    )
    try:
        for threads in (int(t) for t in args.threads.split(",")):
            config = LlamaServerConfig(
                binary=LlamaCppBuild().server, model=model.gguf, ctx_size=4096, threads=threads, alias="tiny"
            )
            with (
                tempfile.TemporaryDirectory() as scratch,
                LlamaServer(config, Path(scratch) / "log") as server,
            ):
                prompts, walls = [], []
                timings: list[dict[str, float]] = []
                for k in range(args.requests):  # fresh text each time: no prompt is served from a cache
                    words = random.Random(k).choices(WORDS, k=200)
                    prompts.append(" ".join(words))
                for prompt in prompts:
                    wall, timing = one_request(server.base_url, prompt)
                    walls.append(wall)
                    timings.append(timing)
            prompt_ms = [t["prompt_ms"] for t in timings]
            decode_ms = [t["predicted_ms"] for t in timings]
            print(
                f"{threads:>7} {percentile(prompt_ms, 50):>13.1f} {percentile(prompt_ms, 99):>7.1f} "
                f"{max(prompt_ms):>7.1f} {percentile(decode_ms, 50):>13.1f} "
                f"{percentile(decode_ms, 99):>7.1f} {max(decode_ms):>7.1f} "
                f"{percentile(walls, 50):>10.3f} {max(walls):>7.3f}",
                flush=True,
            )
    finally:
        for hog in hogs:
            hog.kill()


if __name__ == "__main__":
    main()
