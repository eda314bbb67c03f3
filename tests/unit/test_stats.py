"""Intervals and tests against published values."""

from __future__ import annotations

import pytest

from ctxbench import stats


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
