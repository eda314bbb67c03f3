"""A 1M-token request against the reference server: time to build the body and send it, memory, and a
silent prefill survived (the server says nothing for `--prefill-delay` seconds, then streams).

    .venv/bin/python benchmarks/long_request.py [--tokens 1M] [--prefill-delay 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from client_speed import start_server  # noqa: E402

from ctxbench import Client  # noqa: E402
from ctxbench.engines.models import tiny_model  # noqa: E402
from ctxbench.measure import metrics  # noqa: E402
from ctxbench.text.haystack import build_haystack, pool_for  # noqa: E402
from ctxbench.text.tokens import HfTokenCounter  # noqa: E402


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1 << 20)
    parser.add_argument("--prefill-delay", type=float, default=5.0)
    parser.add_argument("--port", type=int, default=8771)
    args = parser.parse_args()
    server = start_server(args.port, 100.0, "--prefill-delay", str(args.prefill_delay))
    try:
        counter = HfTokenCounter.from_path(tiny_model().tokenizer_dir)
        pool = pool_for(counter, args.tokens)
        before = rss_mb()
        started = time.perf_counter()
        haystack = build_haystack(pool, args.tokens, seed=1)
        built = time.perf_counter() - started
        body_bytes = len(json.dumps({"messages": list(haystack.messages)}, ensure_ascii=False).encode())
        async with Client(f"http://127.0.0.1:{args.port}", "reference") as client:
            record = await client.chat(haystack.messages, max_tokens=16)
        first = record.chunks[0].text.split()[0] if record.chunks else ""
        arrival = int(first.split(":")[0]) if ":" in first else None
        upload = (arrival - record.sent_ns) / 1e9 if arrival else float("nan")
        print(f"prompt: {haystack.planned_tokens} tokens (exact), body {body_bytes / 1e6:.1f} MB")
        print(
            f"build (haystack, token-exact): {built * 1e3:.0f} ms; send (headers written -> server has the "
            "whole "
            f"body): {upload * 1e3:.0f} ms; build + send {(built + upload) * 1e3:.0f} ms"
        )
        print(f"peak RSS {rss_mb():.0f} MB (before building: {before:.0f} MB, the unit pool included)")
        print(
            f"silent prefill of {args.prefill_delay:.0f} s: "
            f"{'survived' if record.ok else 'FAILED: ' + str(record.error)}; "
            f"TTFT {metrics.ttft_s(record):.1f} s, {len(record.chunks)} chunks after it"
        )
    finally:
        server.terminate()


if __name__ == "__main__":
    asyncio.run(main())
