"""How many streamed tokens one ctxbench process consumes, and how exact its clock is, against ground truth.

The reference server (`benchmarks/reference_server.py`) stamps every SSE event with its send time on the
same monotonic clock; each level runs in a fresh worker process (so that its CPU time and peak RSS are its
own): N concurrent streams, each one request of `--tokens` events at `--rate` events/s. Printed per level:
offered and achieved events/s, client CPU seconds, peak RSS, and the timing error (receive - send, per event)
and TTFT error (the client's TTFT - the server's arrival -> first send). Peers that run on the same work are
measured by `benchmarks/peers.py`.

    .venv/bin/python benchmarks/client_speed.py [--streams 1,64,256,1024] [--tokens 500] [--rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def errors_of(records) -> tuple[list[float], list[float], list[float]]:  # type: ignore[no-untyped-def]
    """(receive - send per event, relative per event: (recv_k - recv_0) - (send_k - send_0), TTFT errors), ms."""
    from ctxbench import metrics

    absolute, relative, ttft = [], [], []
    for record in records:
        if not record.ok or not record.chunks:
            continue
        sends, arrivals = [], []
        for chunk in record.chunks:
            for word in chunk.text.split():
                arrival_part, _, sent_part = word.rpartition(":")
                if arrival_part and not sends:
                    server_ttft_ns = int(sent_part) - int(arrival_part)
                sends.append(int(sent_part))
                arrivals.append(chunk.arrived_ns)
        absolute += [(a - s) / 1e6 for a, s in zip(arrivals, sends, strict=True)]
        relative += [((a - arrivals[0]) - (s - sends[0])) / 1e6 for a, s in zip(arrivals[1:], sends[1:], strict=True)]
        client_ttft = metrics.ttft_s(record)
        if client_ttft is not None:
            ttft.append(client_ttft * 1e3 - server_ttft_ns / 1e6)
    return absolute, relative, ttft


async def _run(url: str, streams: int, tokens: int) -> dict[str, float]:
    from ctxbench import Client

    async with Client(url, "reference") as client:
        started = time.perf_counter()
        cpu = time.process_time()
        records = await asyncio.gather(*(client.complete("hello", max_tokens=tokens) for _ in range(streams)))
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
    absolute, relative, ttft = errors_of(records)
    events = sum(len(r.chunks) for r in records)
    return {
        "failed": sum(1 for r in records if not r.ok), "events": events, "wall_s": wall,
        "events_per_s": len(absolute) / wall, "cpu_s": cpu, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "err_p50_ms": percentile(absolute, 50), "err_p99_ms": percentile(absolute, 99), "err_max_ms": max(absolute, default=float("nan")),
        "rel_p99_ms": percentile([abs(x) for x in relative], 99),
        "ttft_err_p50_ms": percentile(ttft, 50), "ttft_err_p99_ms": percentile(ttft, 99),
    }


def start_server(port: int, rate: float, *extra: str) -> subprocess.Popen[bytes]:
    server = subprocess.Popen([sys.executable, str(HERE / "reference_server.py"), "--port", str(port), "--rate",
                               str(rate), *extra], stdout=subprocess.PIPE)
    assert server.stdout is not None
    server.stdout.readline()  # "reference server on ..."
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="1,64,256,1024")
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    if args.worker is not None:
        print(json.dumps(asyncio.run(_run(url, args.worker, args.tokens))))
        return
    server = start_server(args.port, args.rate)
    rows = {}
    try:
        print(f"reference server: {args.rate:.0f} events/s a stream, 1 token an event, {args.tokens} events a stream")
        print(f"{'streams':>7} {'offered/s':>10} {'got/s':>9} {'cpu s':>6} {'RSS MB':>7} {'err p50':>8} {'p99':>7} "
              f"{'max':>7} {'rel p99':>8} {'ttft err p50':>12} {'p99':>7}   (ms)")
        for streams in (int(s) for s in args.streams.split(",")):
            out = subprocess.run([sys.executable, __file__, "--worker", str(streams), "--tokens", str(args.tokens),
                                  "--port", str(args.port)], capture_output=True, text=True, check=True)
            row = json.loads(out.stdout)
            rows[streams] = row
            print(f"{streams:>7} {streams * args.rate:>10.0f} {row['events_per_s']:>9.0f} {row['cpu_s']:>6.1f} "
                  f"{row['peak_rss_mb']:>7.0f} {row['err_p50_ms']:>8.2f} {row['err_p99_ms']:>7.2f} {row['err_max_ms']:>7.1f} "
                  f"{row['rel_p99_ms']:>8.2f} {row['ttft_err_p50_ms']:>12.2f} {row['ttft_err_p99_ms']:>7.2f}"
                  + (f"  {row['failed']} FAILED" if row["failed"] else ""), flush=True)
    finally:
        server.terminate()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
