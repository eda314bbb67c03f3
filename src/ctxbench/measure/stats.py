"""Intervals and tests for saying whether a difference is established, never calling overlap "equal".

- `wilson`: the Wilson score interval of a proportion k/n (accuracy, recall), 95% by default.
- `two_proportions`: the two-sided two-proportion z-test (pooled), for accuracies of two deployments.
- `median_interval`: a seeded percentile-bootstrap interval of a median (TTFT, decode rate over requests
  or over repeats).
- `verdict`: "established" only when two intervals do not overlap; otherwise "not established".
- `percentile`: ctxbench's one percentile (linear between closest ranks, NumPy's default); every report,
  console line, cell and figure prints it (an export whose format fixes another says so).
- `quantile_bounds`: the distribution-free (order-statistic) confidence interval of a percentile, widened
  to hold its estimate where few values put the estimate outside the ranks, with `samples_for_upper` the
  fewest values that give it an upper end (368 for p99 at 95%).
- `decide`: whether a percentile's interval puts it within a limit (met), over it (broke), or neither yet.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

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


def _binomial_cdfs(n: int, p: float) -> list[float]:
    """P(B <= k) for k = 0..n, B ~ Binomial(n, p), each term in log space (no overflow at 100,000
    requests)."""
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    total, out = 0.0, []
    for k in range(n + 1):
        total += math.exp(log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q)
        out.append(min(total, 1.0))
    return out


def quantile_bounds(
    values: Sequence[float], q: float, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """The distribution-free confidence interval of the q-th quantile (0 < q < 1) from order statistics: the
    values of ranks l and u (1-based, sorted) such that the count B of values below the quantile, B ~
    Binomial(n, q), falls in [l, u) with probability at least `confidence`, each tail at most half the rest.
    An end that no rank reaches is None: with n values, an upper end for q exists only when
    1 - q^n >= 1 - tail (`samples_for_upper`), e.g. 368 values for p99 at 95%."""
    n = len(values)
    if n == 0:
        return None, None
    ordered = sorted(values)
    tail = (1 - confidence) / 2
    cdf = _binomial_cdfs(n, q)
    # lower rank l: the largest with P(B <= l - 1) <= tail;
    # upper rank u: the smallest with P(B <= u - 1) >= 1 - tail
    low = next((rank for rank in range(n, 0, -1) if cdf[rank - 1] <= tail), None)
    high = next((rank for rank in range(1, n + 1) if cdf[rank - 1] >= 1 - tail), None)
    # The estimate (`percentile`, interpolated) can fall outside the ranks' values when they are few: 2 values
    # put a p99's low end at the larger, the estimate just under it. Widening an interval to hold its estimate
    # keeps its coverage (a superset covers at least as often), and a reader never sees "0.042 [0.043, ...]".
    estimate = _interpolated(ordered, q)
    return (
        None if low is None else min(ordered[low - 1], estimate),
        None if high is None else max(ordered[high - 1], estimate),
    )


def samples_for_upper(q: float, confidence: float = 0.95) -> int:
    """The fewest values whose largest is an upper confidence end for the q-th quantile:
    1 - q^n >= 1 - tail."""
    tail = (1 - confidence) / 2
    return math.ceil(math.log(tail) / math.log(q))


Decision = Literal["met", "broke", "undetermined"]


def decide(bounds: tuple[float | None, float | None], limit: float) -> Decision:
    """A percentile against a limit by its 95% interval: met when the upper end is at or under the limit,
    broke when the lower end is over it, else undetermined (an end missing, or the limit inside)."""
    low, high = bounds
    if high is not None and high <= limit:
        return "met"
    if low is not None and low > limit:
        return "broke"
    return "undetermined"


def samples_to_decide(n: int, q: float) -> int:
    """The values a percentile left undetermined by `n` aims at next: enough for an upper end
    (`samples_for_upper`), else twice as many (the interval narrows about as 1/sqrt(n))."""
    return max(samples_for_upper(q), 2 * n)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks, as NumPy's default
    (and so vLLM `bench serve`, which calls `np.percentile`)."""
    if not values:
        return None
    return _interpolated(sorted(values), q / 100)


def _interpolated(ordered: Sequence[float], q: float) -> float:
    """The q-th quantile (0-1) of sorted values, linear between closest ranks (`percentile`)."""
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


Bounds = tuple[float | None, float | None]


@dataclass(frozen=True)
class Distribution:
    """Summary of one metric over many requests; with `bounds`, each percentile's 95% distribution-free
    confidence interval (`stats.quantile_bounds`: an end too few values reach is None)."""

    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    p50_ci: Bounds | None = None
    p90_ci: Bounds | None = None
    p99_ci: Bounds | None = None

    @classmethod
    def of(cls, values: Iterable[float | None], bounds: bool = False) -> Distribution:
        present = [v for v in values if v is not None]
        mean = sum(present) / len(present) if present else None
        cis = [quantile_bounds(present, q) for q in (0.5, 0.9, 0.99)] if bounds and present else [None] * 3
        return cls(
            len(present),
            mean,
            percentile(present, 50),
            percentile(present, 90),
            percentile(present, 99),
            *cis,
        )
