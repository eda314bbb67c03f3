"""MLPerf's early-stopping estimate of a tail percentile: the value the true percentile stays under at 99%
confidence, as MLPerf LoadGen computes it (`loadgen/early_stopping.cc`, `results.cc`) and MLPerf Endpoints
writes it into `result_summary.json` (`early_stopping_percentiles`, mlcommons/endpoints PR #417).

The test: among `h` requests within a latency and `t` over it, the chance of at most `t` over when the true
rate of "over" is 1 - p is the binomial CDF P(Bin(h + t, 1 - p) <= t) = I_p(h, t + 1), the regularized
incomplete beta. `min_passing(t, p)` is the fewest `h` that make that chance below 1 - c (c = 0.99). From `n`
sorted latencies the estimate is the t-th highest, `t` the largest over-count with min_passing(t) + t <= n;
with fewer than min_passing(1) + 1 requests (662 for p99) there is none. The estimate is never below the
empirical percentile (NumPy's "lower", `endpoints_summary`). ctxbench's own intervals are
`stats.quantile_bounds` (95%, two-sided); this is the one an MLPerf reader expects beside them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.99  # LoadGen's, fixed (results.cc): not a knob
FLOOR_PERCENTILE = 50.0  # estimates are made for the grid's percentiles from the median up


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (DLMF 8.17.22), by the modified Lentz method."""
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            step = c * d
            value *= step
        if abs(step - 1.0) < eps:
            break
    return value


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side; else by symmetry
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _odds(h: int, t: int, p: float) -> float:
    """P(at most t of h + t requests over the p-th percentile's latency)."""
    return regularized_beta(h, t + 1, p)


def min_passing(t: int, p: float, confidence: float = CONFIDENCE) -> int:
    """The fewest requests within a latency that, beside `t` over it, show the p-th quantile (0 < p < 1)
    within it at `confidence` (LoadGen's MinPassingQueriesFinder; the test is strict, odds < 1 - c)."""
    if not 0 < p < 1 or not 0 < confidence < 1:
        raise ValueError(f"early stopping needs 0 < p < 1 and 0 < confidence < 1, not p={p}, c={confidence}")
    target = 1.0 - confidence
    low, high = 1, 2
    while _odds(high, t, p) >= target:
        high *= 2
    while low < high:  # odds fall as h grows: the boundary by bisection
        middle = (low + high) // 2
        low, high = (low, middle) if _odds(middle, t, p) < target else (middle + 1, high)
    return low


def over_count(n: int, p: float, confidence: float = CONFIDENCE) -> int:
    """The largest t >= 1 with min_passing(t) + t <= n (0: too few requests for any estimate)."""
    if min_passing(1, p, confidence) + 1 > n:
        return 0
    low, high = 1, 2
    while min_passing(high, p, confidence) + high <= n:
        high *= 2
    while low < high - 1:
        middle = (low + high) // 2
        low, high = (middle, high) if min_passing(middle, p, confidence) + middle <= n else (low, middle)
    return low


def estimate(ordered: Sequence[float], percentile: float, confidence: float = CONFIDENCE) -> float | None:
    """The early-stopping estimate of `percentile` (0-100, MLPerf's grid convention) from values sorted
    ascending: the t-th highest (`over_count`), or None below the floor of requests it needs."""
    if not 1.0 <= percentile < 100.0:
        raise ValueError(
            f"percentile is 0-100 as MLPerf's grid writes it (99.0), and below 100: {percentile}"
        )
    t = over_count(len(ordered), percentile / 100, confidence)
    return ordered[len(ordered) - t] if t else None


def estimates(ordered: Sequence[float], grid: Sequence[float]) -> dict[str, float | None]:
    """{grid key: estimate} for the grid's percentiles from the median up, keyed as the grid's
    `percentiles` are ("99.0"), in the grid's order: what `early_stopping_percentiles` holds."""
    return {str(p): estimate(ordered, p) for p in grid if FLOOR_PERCENTILE <= p < 100.0}
