"""How much a second user's long prefill slows the first user's decode on llama-server (the tiny model, two
slots): the size of the stall ctxbench's ramp reports (`decode_stall`), measured here rather than asserted in
a test. Each trial: one user decodes `--decode` tokens; `--after` seconds later another sends a prompt of
`--prompt` tokens. Printed per trial: the engine's prefill window (its own `prompt_ms`), the first user's
decode rate inside and outside it, and their ratio.

    .venv/bin/python benchmarks/decode_stall.py [--trials 3] [--prompt 16320] [--decode 4000] [--after 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from ctxbench.checks.ramp.labels import user_of
from ctxbench.client.stream import Client
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServer, LlamaServerConfig
from ctxbench.engines.models import tiny_model
from ctxbench.measure import decode_stall
from ctxbench.text.haystack import UnitPool, build_haystack
from ctxbench.text.tokens import HfTokenCounter

SAMPLING = {"temperature": 0.0, "ignore_eos": True}


async def trial(url: str, pool: UnitPool, i: int, args: argparse.Namespace) -> decode_stall.Stall:
    short = build_haystack(pool, 200, 2 * i + 1)
    long = build_haystack(pool, args.prompt, 2 * i + 2)  # fresh per trial: nothing of it cached
    async with Client(url, "tiny") as client:

        async def newcomer():
            await asyncio.sleep(args.after)
            return await client.chat(
                long.messages,
                max_tokens=4,
                extra_body=SAMPLING,
                labels={"user": "1"},
                request_id=f"p{i}",
            )

        decoding, arriving = await asyncio.gather(
            client.chat(
                short.messages,
                max_tokens=args.decode,
                extra_body=SAMPLING,
                labels={"user": "0"},
                request_id=f"d{i}",
            ),
            newcomer(),
        )
    if not (decoding.ok and arriving.ok):
        raise SystemExit(f"a request failed: {decoding.error or arriving.error}")
    figure = decode_stall.user_stalls([decoding, arriving], user_of)[f"d{i}"]
    if figure is None:
        raise SystemExit("no stall figure: the prefill did not overlap the decode")
    return figure


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--prompt", type=int, default=16320)
    parser.add_argument("--decode", type=int, default=4000)
    parser.add_argument("--after", type=float, default=0.3)
    args = parser.parse_args()
    tiny = tiny_model()
    pool = UnitPool.generated(HfTokenCounter.from_path(tiny.tokenizer_dir), units=1024)
    config = LlamaServerConfig(
        binary=LlamaCppBuild().server,
        model=tiny.gguf,
        ctx_size=2 * (args.prompt + 64),
        parallel=2,
        alias="tiny",
    )
    print("| trial | window | prefill inside s | decode inside tok/s | decode outside tok/s | slowdown |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work, LlamaServer(config, Path(work) / "server.log") as server:
        for number in range(args.trials):
            figure = await trial(server.base_url, pool, number, args)
            print(
                f"| {number + 1} | {figure.window} | {figure.time_inside_s:.2f} | "
                f"{figure.rate_inside or 0:.1f} | {figure.rate_outside or 0:.1f} | "
                f"{figure.factor or 0:.1f}x |"
            )


if __name__ == "__main__":
    asyncio.run(main())
