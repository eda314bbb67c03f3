"""Intervals and tests against published values."""

from __future__ import annotations

import random

import pytest

from ctxbench.measure import stats
from ctxbench.measure.stats import quantile_bounds, samples_for_upper


def test_wilson_interval_matches_the_published_example() -> None:
    # Newcombe (1998), Table I: 81/263 -> 0.2553 to 0.3662 (Wilson score, no continuity correction).
    interval = stats.wilson(81, 263)
    assert interval is not None
    assert interval.low == pytest.approx(0.2553, abs=5e-4) and interval.high == pytest.approx(
        0.3662, abs=5e-4
    )
    assert stats.wilson(0, 10).low == 0.0 and stats.wilson(10, 10).high == 1.0
    assert stats.wilson(0, 0) is None


def test_two_proportion_test_separates_clear_and_unclear_differences() -> None:
    # 80/100 against 60/100: z = 3.09, p = 0.002 (pooled).
    assert stats.two_proportions(80, 100, 60, 100) == pytest.approx(0.0020, abs=2e-4)
    assert stats.two_proportions(8, 10, 6, 10) > 0.05
    assert stats.two_proportions(5, 5, 5, 5) == 1.0


def test_median_interval_is_seeded_and_verdicts_never_call_overlap_equal() -> None:
    fast = stats.median_interval([1.0, 1.1, 0.9, 1.05, 0.95, 1.02])
    slow = stats.median_interval([2.0, 2.2, 1.9, 2.1, 2.05, 1.95])
    assert fast == stats.median_interval([1.0, 1.1, 0.9, 1.05, 0.95, 1.02])
    assert fast is not None and fast.low <= fast.estimate <= fast.high
    assert stats.verdict(fast, slow) == "established (intervals do not overlap)"
    close = stats.median_interval([1.0, 1.5, 0.8, 1.3, 1.2, 0.9])
    assert stats.verdict(fast, close).startswith("not established")
    assert stats.median_interval([1.0, 2.0]) is None
    assert "too few" in stats.verdict(None, slow)


def test_the_quantile_interval_covers_the_true_quantile_at_least_as_often_as_it_says() -> None:
    # Uniform(0, 1): the true q-quantile is q. Over 2,000 seeded samples of 400, the 95% interval of p99 and
    # of the median must each hold the truth in at least 95% of them (the order-statistic interval is
    # conservative: a little more).
    rng = random.Random(7)
    for q in (0.5, 0.99):
        held = 0
        for _ in range(2000):
            low, high = quantile_bounds([rng.random() for _ in range(400)], q)
            assert low is not None and high is not None
            held += low <= q <= high
        assert 0.95 <= held / 2000 <= 0.99, (q, held)


def test_an_end_the_values_cannot_reach_is_none_and_the_count_needed_is_said() -> None:
    assert samples_for_upper(0.99) == 368 and samples_for_upper(0.9) == 36 and samples_for_upper(0.5) == 6
    values = [float(v) for v in range(1, 368)]
    assert quantile_bounds(values, 0.99)[1] is None  # 367 values: no upper end for p99
    assert quantile_bounds([*values, 368.0], 0.99)[1] == 368.0  # 368: the largest is it
    assert quantile_bounds([], 0.5) == (None, None)
    low, high = quantile_bounds([float(v) for v in range(1, 101)], 0.5)
    assert (low, high) == (40.0, 61.0)  # the textbook ranks for a median of 100 at 95%


def test_a_percentile_is_written_with_its_interval_or_says_too_few() -> None:
    from ctxbench.render.tables import percentile_text, stats_text
    from ctxbench.store.check_files import Stats

    values = [float(v) for v in range(1, 101)]  # 100 values: p50 and p90 bounded, p99 has no upper end
    low, high = quantile_bounds(values, 0.5)
    assert percentile_text(values, 0.5) == f"50.500 [{low:.3f}, {high:.3f}]"
    assert low is not None and high is not None and low < 50.5 < high
    assert percentile_text(values, 0.99, 1).endswith(", too few]")
    assert percentile_text([2.0], 0.5) == "2.000 [too few]"  # one value: no end at all
    assert percentile_text([None, None], 0.5) == "n/a"
    # a recorded figure keeps its recorded value and interval; one recorded before intervals gets its
    # interval from the requests it was measured over, never a recomputed value
    recorded = Stats(
        n=100, p50=50.0, p90=90.0, p99=99.0, p50_ci=(41.0, 62.0), p90_ci=(83.0, None), p99_ci=(95.0, None)
    )
    assert stats_text(recorded, values, 0) == "50 [41, 62] / 90 [83, too few] / 99 [95, too few]"
    older = Stats(n=100, p50=50.0, p90=90.0, p99=99.0)
    assert stats_text(older, values, 1, (0.5,)) == f"50.0 [{low:.1f}, {high:.1f}]"


def test_every_interval_holds_its_own_estimate_at_every_size() -> None:
    # Issue 68: 2 requests printed "0.042 [0.043, too few]", a p99 below its own low end. Over many seeds and
    # sizes from 1 to 1,000, skewed and tied values alike, each percentile lies inside its interval.
    rng = random.Random(68)
    sizes = [*range(1, 60), 99, 100, 101, 367, 368, 369, 500, 999, 1000]
    for n in sizes:
        for seed in range(8 if n < 400 else 2):
            draw = random.Random(seed * 7919 + n)
            values = [draw.lognormvariate(0, 1) if seed % 2 else float(draw.randint(1, 4)) for _ in range(n)]
            for q in (0.5, 0.9, 0.99, rng.random()):
                estimate = stats.percentile(values, q * 100)
                low, high = quantile_bounds(values, q)
                assert estimate is not None
                assert low is None or low <= estimate, (n, seed, q, low, estimate)
                assert high is None or estimate <= high, (n, seed, q, estimate, high)


def test_a_limit_is_met_by_the_upper_end_broken_by_the_lower_and_else_undetermined() -> None:
    assert stats.decide((0.1, 0.2), 0.2) == "met"  # at the limit meets it
    assert stats.decide((0.21, 0.5), 0.2) == "broke"
    assert stats.decide((0.1, 0.5), 0.2) == "undetermined"  # the limit inside the interval
    assert stats.decide((0.1, None), 0.2) == "undetermined"  # too few for an upper end: not broke
    assert stats.decide((0.3, None), 0.2) == "broke"  # but a low end over the limit decides it
    assert stats.decide((None, None), 0.2) == "undetermined"
    # what an undetermined percentile asks for next: an upper end, else twice the requests
    assert stats.samples_to_decide(4, 0.99) == 368 and stats.samples_to_decide(400, 0.99) == 800


def test_an_interval_recorded_without_its_estimate_is_shown_holding_it() -> None:
    from ctxbench.render.tables import bounded_text

    # what a run recorded before 2026-12-08 could hold for 2 requests: a p99 under its own low end
    assert bounded_text(0.0429, (0.043, None)) == "0.043 [0.043, too few]"
    assert bounded_text(0.0429, (0.010, 0.0420), 4) == "0.0429 [0.0100, 0.0429]"
