"""What ctxbench's statistics cost and what a decided level asks of a run, from the demo's size to 40,000x it.

Two tables:
1. **Cost**: one level's percentile intervals (`Distribution.of(..., bounds=True)`: p50, p90, p99 and their
   95% intervals) and the MLPerf export's early-stopping map (`early_stopping.estimates`, the grid from the
   median up), CPU seconds over n values, 24 (the demo's largest level) to 1,000,000, with the CPU a value
   against 2,400's (100x the demo's) and NumPy's `percentile` over the same values (the peer a script would
   call, without intervals).
2. **Requests to decide**: a level whose TTFTs are lognormal (the spread of a loaded server), judged against a
   p99 limit at a multiple of its true p99, run round by round by the rule `_Levels` follows (4 requests
   first, then `stats.samples_to_decide`, up to 4,096): how many requests each decision took, median of 20
   seeds, and how often it decided right (broke below 1x, met above).

    .venv/bin/python benchmarks/decided_levels.py [--max 1000000]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics as pystats
import time
from collections.abc import Callable
from functools import partial

import numpy

from ctxbench.measure import early_stopping
from ctxbench.measure.stats import Distribution, decide, quantile_bounds, samples_to_decide
from ctxbench.results.endpoints_summary import PERCENTILES


def _cpu(work: Callable[[], object], repeats: int = 1) -> float:
    """CPU seconds of one call of `work` (the best of `repeats`: a tiny n is timed several times)."""
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def cost_table(largest: int) -> None:
    sizes = [n for n in (24, 2_400, 24_000, 240_000, 1_000_000) if n <= largest]
    print(
        "| values | intervals CPU s | early stopping CPU s | NumPy percentiles CPU s | intervals / NumPy | "
        "CPU us a value | vs 2,400 |"
    )
    print("|---|---|---|---|---|---|---|")
    base = None
    for n in sizes:
        values = [random.Random(n).lognormvariate(0, 0.5) for _ in range(n)]
        repeats = 20 if n < 10_000 else 1
        intervals = _cpu(partial(Distribution.of, values, bounds=True), repeats)
        stopping = _cpu(partial(early_stopping.estimates, sorted(values), PERCENTILES), repeats)
        peer = max(_cpu(partial(numpy.percentile, numpy.array(values), [50, 90, 99]), repeats), 1e-6)
        per_value = (intervals + stopping) / n
        base = base if base is not None or n < 2_400 else per_value  # 24 values: too few to time a value
        print(
            f"| {n:,} | {intervals:.5f} | {stopping:.5f} | {peer:.5f} | {intervals / peer:.0f}x | "
            f"{per_value * 1e6:.2f} | {per_value / base if base else 1:.2f} |"
        )


def requests_to_decide(ratio: float, seed: int, first: int = 4, cap: int = 4096) -> tuple[int, str]:
    """Rounds of a lognormal level (true p99 = 1) against a p99 limit of `ratio`, until decided or `cap`."""
    rng = random.Random(seed)
    sigma = 0.5
    scale = math.exp(-2.326 * sigma)  # the lognormal's p99 at 1.0
    values: list[float] = []
    target = first
    while True:
        values += [scale * rng.lognormvariate(0, sigma) for _ in range(target - len(values))]
        verdict = decide(quantile_bounds(values, 0.99), ratio)
        if verdict != "undetermined" or len(values) >= cap:
            return len(values), verdict
        target = min(samples_to_decide(len(values), 0.99), cap)


def decision_table() -> None:
    print()
    print("| limit / true p99 | requests to decide (median of 20) | decided right | undetermined at 4,096 |")
    print("|---|---|---|---|")
    for ratio in (0.5, 0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2.0):
        runs = [requests_to_decide(ratio, seed) for seed in range(20)]
        right = "met" if ratio > 1 else "broke"
        print(
            f"| {ratio:g} | {pystats.median(n for n, _ in runs):,.0f} | "
            f"{sum(v == right for _, v in runs)}/20 | {sum(v == 'undetermined' for _, v in runs)}/20 |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=1_000_000, help="the largest number of values")
    args = parser.parse_args()
    cost_table(args.max)
    decision_table()


if __name__ == "__main__":
    main()
