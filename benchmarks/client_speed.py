"""How many streamed tokens one ctxbench process consumes, and how exact its clock is, against ground truth.

The reference server (`benchmarks/reference_server.py`) stamps every SSE event with its send time on the
same monotonic clock; each level runs in a fresh worker process (so that its CPU time and peak RSS are its
own): N concurrent streams, each one request of `--tokens` events at `--rate` events/s. Printed per level:
offered and achieved events/s, client CPU seconds, peak RSS, and the timing error (receive - send, per event)
and TTFT error (the client's TTFT - the server's arrival -> first send). Peers that run on the same work are
measured by `benchmarks/peers.py`.

With `--processes P` each level's streams are spread over P client processes started together (their stamps
share CLOCK_MONOTONIC, so their errors merge); CPU is then the sum and RSS the largest.

`--loop uvloop` runs the client on uvloop's event loop instead of asyncio's. `--floor` replaces ctxbench's
client by the do-nothing reader: a plain asyncio protocol per stream that sends the request and keeps each
read's bytes with its time, parsed only after the level (no HTTP, SSE or JSON decoding while it runs): the
least any Python client on that loop can do, so the floor the loop itself sets.

    .venv/bin/python benchmarks/client_speed.py [--streams 1,64,256,1024] [--tokens 500] [--rate 100] \
        [--processes 1] [--loop asyncio|uvloop] [--floor]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return (
        ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")
    )


def errors_of(records) -> tuple[list[float], list[float], list[float]]:
    """(receive - send per event, relative per event: (recv_k - recv_0) - (send_k - send_0), TTFT errors),
    ms."""
    from ctxbench.measure import metrics

    absolute, relative, ttft = [], [], []
    for record in records:
        if not record.ok or not record.chunks:
            continue
        sends: list[int] = []
        arrivals: list[int] = []
        for chunk in record.chunks:
            for word in chunk.text.split():
                arrival_part, _, sent_part = word.rpartition(":")
                if arrival_part and not sends:
                    server_ttft_ns = int(sent_part) - int(arrival_part)
                sends.append(int(sent_part))
                arrivals.append(chunk.arrived_ns)
        absolute += [(a - s) / 1e6 for a, s in zip(arrivals, sends, strict=True)]
        relative += [
            ((a - arrivals[0]) - (s - sends[0])) / 1e6 for a, s in zip(arrivals[1:], sends[1:], strict=True)
        ]
        client_ttft = metrics.ttft_s(record)
        if client_ttft is not None:
            ttft.append(client_ttft * 1e3 - server_ttft_ns / 1e6)
    return absolute, relative, ttft


async def _run(url: str, streams: int, tokens: int) -> dict[str, Any]:
    """One worker's streams: its counts, CPU, peak RSS and raw errors (merged by `summarize`)."""
    from ctxbench import Client

    async with Client(url, "reference") as client:
        started_ns = time.perf_counter_ns()
        cpu = time.process_time()
        records = await asyncio.gather(*(client.complete("hello", max_tokens=tokens) for _ in range(streams)))
        ended_ns = time.perf_counter_ns()
        cpu = time.process_time() - cpu
    absolute, relative, ttft = errors_of(records)
    return {
        "failed": sum(1 for r in records if not r.ok),
        "started_ns": started_ns,
        "ended_ns": ended_ns,
        "cpu_s": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "absolute": absolute,
        "relative": relative,
        "ttft": ttft,
    }


class _Floor(asyncio.Protocol):
    """One stream read and stamped, nothing more."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request, self.done, self.reads = request, done, []  # type: ignore[var-annotated]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.reads.append((time.perf_counter_ns(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _floor(url: str, streams: int, tokens: int) -> dict[str, Any]:
    """The do-nothing reader's streams; errors from the reads' stamps and the server's send stamps."""
    import re

    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(
        {"model": "reference", "prompt": "hello", "max_tokens": tokens, "stream": True}
    ).encode()
    request = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    started_ns, cpu = time.perf_counter_ns(), time.process_time()
    done = [loop.create_future() for _ in range(streams)]
    readers = [
        (await loop.create_connection(functools.partial(_Floor, request, f), host, int(port)))[1]
        for f in done
    ]
    await asyncio.gather(*done)
    ended_ns, cpu = time.perf_counter_ns(), time.process_time() - cpu
    sends = re.compile(rb'"text": ?"(?:\d+:)?(\d+) "')
    absolute = [
        (stamp - int(sent)) / 1e6
        for reader in readers
        for stamp, data in reader.reads
        for sent in sends.findall(data)
    ]
    return {
        "failed": 0,
        "started_ns": started_ns,
        "ended_ns": ended_ns,
        "cpu_s": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "absolute": absolute,
        "relative": [],
        "ttft": [],
    }


def summarize(parts: list[dict[str, Any]]) -> dict[str, float]:
    """One level's row from its workers (one, or several processes sharing the streams on the same clock)."""
    absolute = [x for part in parts for x in part["absolute"]]
    relative = [abs(x) for part in parts for x in part["relative"]]
    ttft = [x for part in parts for x in part["ttft"]]
    wall = (max(p["ended_ns"] for p in parts) - min(p["started_ns"] for p in parts)) / 1e9
    return {
        "failed": sum(p["failed"] for p in parts),
        "events": len(absolute),
        "wall_s": wall,
        "events_per_s": len(absolute) / wall,
        "cpu_s": sum(p["cpu_s"] for p in parts),
        "peak_rss_mb": max(p["peak_rss_mb"] for p in parts),
        "err_p50_ms": percentile(absolute, 50),
        "err_p99_ms": percentile(absolute, 99),
        "err_max_ms": max(absolute, default=float("nan")),
        "rel_p99_ms": percentile(relative, 99),
        "ttft_err_p50_ms": percentile(ttft, 50),
        "ttft_err_p99_ms": percentile(ttft, 99),
    }


def run_level(
    port: int, streams: int, tokens: int, processes: int = 1, loop: str = "asyncio", floor: bool = False
) -> dict[str, float]:
    """`streams` spread over `processes` worker processes started together."""
    shares = [streams // processes + (1 if i < streams % processes else 0) for i in range(processes)]
    options = ["--loop", loop, *(["--floor"] if floor else [])]
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(share), "--tokens", str(tokens), "--port", str(port)]
            + options,
            stdout=subprocess.PIPE,
            text=True,
        )
        for share in shares
        if share
    ]
    parts = []
    for worker in workers:
        out, _ = worker.communicate()
        if worker.returncode != 0:
            raise SystemExit(f"a client worker failed (exit {worker.returncode})")
        parts.append(json.loads(out))
    return summarize(parts)


def start_server(port: int, rate: float, *extra: str) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "reference_server.py"), "--port", str(port), "--rate", str(rate), *extra],
        stdout=subprocess.PIPE,
    )
    assert server.stdout is not None
    server.stdout.readline()  # "reference server on ..."
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="1,64,256,1024")
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--processes", type=int, default=1, help="client processes sharing each level's streams"
    )
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--floor", action="store_true", help="the do-nothing reader instead of ctxbench")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    if args.worker is not None:
        work = (_floor if args.floor else _run)(url, args.worker, args.tokens)
        if args.loop == "uvloop":
            import uvloop

            print(json.dumps(uvloop.run(work)))
        else:
            print(json.dumps(asyncio.run(work)))
        return
    server = start_server(args.port, args.rate)
    rows = {}
    try:
        print(
            f"reference server: {args.rate:.0f} events/s a stream, 1 token an event, {args.tokens} events a "
            "stream; "
            f"{args.processes} client process(es), {args.loop} loop, "
            + ("the do-nothing reader" if args.floor else "ctxbench's client")
        )
        print(
            f"{'streams':>7} {'offered/s':>10} {'got/s':>9} {'cpu s':>6} {'RSS MB':>7} {'err p50':>8} "
            f"{'p99':>7} "
            f"{'max':>7} {'rel p99':>8} {'ttft err p50':>12} {'p99':>7}   (ms)"
        )
        for streams in (int(s) for s in args.streams.split(",")):
            row = run_level(args.port, streams, args.tokens, args.processes, args.loop, args.floor)
            rows[streams] = row
            print(
                f"{streams:>7} {streams * args.rate:>10.0f} {row['events_per_s']:>9.0f} {row['cpu_s']:>6.1f} "
                f"{row['peak_rss_mb']:>7.0f} {row['err_p50_ms']:>8.2f} {row['err_p99_ms']:>7.2f} "
                f"{row['err_max_ms']:>7.1f} "
                f"{row['rel_p99_ms']:>8.2f} {row['ttft_err_p50_ms']:>12.2f} {row['ttft_err_p99_ms']:>7.2f}"
                + (f"  {row['failed']} FAILED" if row["failed"] else ""),
                flush=True,
            )
    finally:
        server.terminate()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
