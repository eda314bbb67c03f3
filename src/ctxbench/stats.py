"""Intervals and tests for saying whether a difference is established, never calling overlap "equal".

- `wilson`: the Wilson score interval of a proportion k/n (accuracy, recall), 95% by default.
- `two_proportions`: the two-sided two-proportion z-test (pooled), for accuracies of two deployments.
- `median_interval`: a seeded percentile-bootstrap interval of a median (TTFT, decode rate over requests
  or over repeats).
- `verdict`: "established" only when two intervals do not overlap; otherwise "not established".
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def text(self, digits: int = 3) -> str:
        return f"{self.estimate:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def wilson(k: int, n: int, z: float = Z95) -> Interval | None:
    """Wilson score interval: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), p = k/n."""
    if n <= 0:
        return None
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At k = 0 (k = n) the bound is exactly 0 (1); rounding would leave it a hair off.
    return Interval(p, 0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))


def two_proportions(k1: int, n1: int, k2: int, n2: int) -> float | None:
    """Two-sided p-value of the pooled two-proportion z-test (H0: equal proportions)."""
    if n1 <= 0 or n2 <= 0:
        return None
    pooled = (k1 + k2) / (n1 + n2)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if spread == 0:
        return 1.0
    z = (k1 / n1 - k2 / n2) / spread
    return math.erfc(abs(z) / math.sqrt(2))


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def median_interval(
    values: Sequence[float], confidence: float = 0.95, resamples: int = 2000, seed: str = "ctxbench"
) -> Interval | None:
    """The median with a percentile-bootstrap interval (seeded, so a report rebuilds the same numbers).
    Fewer than 3 values give no interval: one or two numbers have no spread worth the name."""
    present = [v for v in values if v is not None]
    if len(present) < 3:
        return None
    rng = random.Random(seed)
    medians = sorted(median(rng.choices(present, k=len(present))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = medians[int(tail * (resamples - 1))]
    high = medians[int(math.ceil((1 - tail) * (resamples - 1)))]
    return Interval(median(present), low, high)


def verdict(a: Interval | None, b: Interval | None) -> str:
    """`established` when both intervals exist and do not overlap; else why it is not."""
    if a is None or b is None:
        return "not established (too few values for an interval)"
    return (
        "not established (intervals overlap)" if a.overlaps(b) else "established (intervals do not overlap)"
    )
