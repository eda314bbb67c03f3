"""A conversation ramp to 1M tokens against the reference server: per turn, the time to build and count the
token-exact prompt over the whole history (in a worker thread, as the ramp does), the request body, the
send, the process's peak memory, the event loop's worst lateness meanwhile (a 10 ms ticker), which is
what a second user's stream would see while this user's turn is being built, and the client's time
between the previous turn's last byte and this turn's send (the time the GPU waits on the client).
Every prompt is checked against a whole count by a second counter, outside the timings.

    .venv/bin/python benchmarks/ramp_1m.py [--end 1M] [--turns 10] [--whole]

`--whole` counts every prompt whole (the counter remembers nothing), as before issue 33.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from client_speed import start_server  # noqa: E402

from ctxbench import Client  # noqa: E402
from ctxbench.checks.ramp import RampParams  # noqa: E402
from ctxbench.checks.ramp.check import FOLLOW_UP, NEEDLE_DEPTH, ramp_schedule  # noqa: E402
from ctxbench.engines.models import tiny_model  # noqa: E402
from ctxbench.text.haystack import Needle, build_haystack, pool_for  # noqa: E402
from ctxbench.text.prompt_memo import PromptMemo  # noqa: E402
from ctxbench.text.tokens import HfTokenCounter  # noqa: E402

TICK_S = 0.010


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def ticker(lateness: list[float], stop: asyncio.Event) -> None:
    """Sleep 10 ms at a time and keep the worst lateness: how long the loop could not run."""
    while not stop.is_set():
        planned = time.perf_counter() + TICK_S
        await asyncio.sleep(TICK_S)
        lateness.append(time.perf_counter() - planned)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", default="32K")
    parser.add_argument("--end", default="1M")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--port", type=int, default=8772)
    parser.add_argument("--whole", action="store_true", help="count every prompt whole (before issue 33)")
    args = parser.parse_args()
    spec = RampParams(start=args.start, end=args.end, turns=args.turns)
    server = start_server(args.port, 2000.0)
    try:
        counter = HfTokenCounter.from_path(tiny_model().tokenizer_dir)
        judge = HfTokenCounter.from_path(tiny_model().tokenizer_dir)
        if args.whole:
            counter._memo = PromptMemo(())  # no split markers: nothing remembered, every prompt counted whole
        started = time.perf_counter()
        pool = pool_for(counter, spec.end)
        print(
            f"unit pool for {spec.end} tokens: {time.perf_counter() - started:.2f} s, peak RSS "
            f"{rss_mb():.0f} MB"
        )
        needle = Needle.random(random.Random(1))
        question = f"{needle.question} {FOLLOW_UP}"
        history: list[dict[str, str]] = []
        print(
            f"{'turn':>4} {'tokens':>9} {'build s':>8} {'body MB':>8} {'send+reply s':>13} "
            f"{'loop late max ms':>17} {'between turns s':>16} {'peak RSS MB':>12}"
        )
        previous_end: int | None = None
        sent_prompts: list[tuple[tuple[dict[str, str], ...], int]] = []
        async with Client(f"http://127.0.0.1:{args.port}", "reference") as client:
            for number, target in enumerate(ramp_schedule(spec), start=1):
                lateness: list[float] = []
                stop = asyncio.Event()
                tick = asyncio.create_task(ticker(lateness, stop))
                began = time.perf_counter()
                haystack = await asyncio.to_thread(
                    build_haystack,
                    pool,
                    target,
                    number,
                    question=question,
                    history=history,
                    needle=needle,
                    depth=NEEDLE_DEPTH if number == 1 else None,
                )
                built = time.perf_counter() - began
                stop.set()
                await tick
                assert haystack.planned_tokens == target, (haystack.planned_tokens, target)
                began = time.perf_counter()
                record = await client.chat(haystack.messages, max_tokens=32)
                sent = time.perf_counter() - began
                assert record.ok, record.error
                between = "" if previous_end is None else f"{(record.sent_ns - previous_end) / 1e9:.3f}"
                await asyncio.to_thread(counter.remember, haystack.messages, haystack.planned_tokens)
                previous_end = record.end_ns
                sent_prompts.append((haystack.messages, target))
                history = [*haystack.messages, {"role": "assistant", "content": record.text}]
                print(
                    f"{number:>4} {target:>9} {built:>8.2f} {record.request_bytes / 1e6:>8.1f} {sent:>13.2f} "
                    f"{max(lateness, default=0) * 1e3:>17.1f} {between:>16} {rss_mb():>12.0f}"
                )
        for messages, target in sent_prompts:  # after the ramp: the judge's time is not the client's
            bos, prompt = judge.rendered(messages)
            assert bos + judge.count_rendered(prompt) == target, target  # token-exact, counted whole
        print(f"every prompt token-exact, counted whole: {len(sent_prompts)} turns")
    finally:
        server.terminate()


if __name__ == "__main__":
    asyncio.run(main())
