"""How fast a unique, token-exact haystack is built, against naive whole-text re-tokenization.

    .venv/bin/python benchmarks/haystack_speed.py [--tokens 1048576] [--repeats 5]

Prints a table: milliseconds per haystack and per 1M tokens, for ctxbench's builder (units
tokenized once, assembled by counts) and for the baseline that tokenizes the whole prompt once
(the least any builder that re-tokenizes its text must do). The one-time pool build is shown apart.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ctxbench.engines.models import tiny_model
from ctxbench.text.haystack import build_haystack, pool_for, request_seed
from ctxbench.text.tokens import HfTokenCounter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_048_576)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    counter = HfTokenCounter.from_path(tiny_model().tokenizer_dir)
    started = time.perf_counter()
    pool = pool_for(counter, args.tokens)
    pool_ms = (time.perf_counter() - started) * 1000

    build_ms, naive_ms = [], []
    for i in range(args.repeats):
        started = time.perf_counter()
        haystack = build_haystack(pool, args.tokens, request_seed("bench", i), depth=0.5)
        build_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        exact = counter.count_chat(haystack.messages)
        naive_ms.append((time.perf_counter() - started) * 1000)
        assert exact == args.tokens == haystack.planned_tokens, (exact, haystack.planned_tokens)

    per_million = 1_000_000 / args.tokens
    build, naive = statistics.median(build_ms), statistics.median(naive_ms)
    print(
        f"haystack of {args.tokens} tokens (tiny BPE tokenizer, chat template included), median of "
        f"{args.repeats}"
    )
    print(f"{'method':<44}{'ms/haystack':>14}{'ms/1M tokens':>14}{'vs ctxbench':>13}")
    print(
        f"{'ctxbench: units counted once, assembled':<44}{build:>14.1f}"
        f"{build * per_million:>14.1f}{1.0:>12.1f}x"
    )
    print(
        f"{'baseline: tokenize the whole prompt once':<44}{naive:>14.1f}{naive * per_million:>14.1f}"
        f"{naive / build:>12.1f}x"
    )
    print(f"{'one-time: tokenize the unit pool':<44}{pool_ms:>14.1f}{'':>14}{'':>13}")
    print(f"exact: every haystack re-counted in full equals {args.tokens} tokens")


if __name__ == "__main__":
    main()
