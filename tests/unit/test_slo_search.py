"""The SLO search's rule (slo_search.py): which limits a level breaks, bracketing then bisection, the probe
budget, the repeats of the level found, and a resumed search replaying the same probes."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

import pytest
from pydantic import ValidationError

from ctxbench.config.load_params import SloParams, ThroughputParams
from ctxbench.measure.slo_search import (
    Breach,
    bracket,
    breach_text,
    breaches,
    judge,
    search,
    search_text,
    slo_text,
)


def level(ttft_p99: float, *, requests: int = 10, failed: int = 0, good: int | None = None, **extra: Any):
    return {
        "requests": requests,
        "failed": failed,
        "goodput_requests": requests - failed if good is None else good,
        "ttft_s": {"p99": ttft_p99},
        "tpot_s": {"p99": 0.01},
        **extra,
    }


def params(**kwargs: Any) -> ThroughputParams:
    return ThroughputParams(levels=[], **kwargs)


def run_search(p: ThroughputParams, start: float, ttft_of) -> tuple[dict[str, Any], list[tuple[float, int]]]:
    calls: list[tuple[float, int]] = []

    async def measure(value: float, run: int) -> dict[str, Any]:
        calls.append((value, run))
        return level(ttft_of(value, run))

    return asyncio.run(search(p, start, measure)), calls


def test_a_level_breaks_each_limit_it_exceeds_and_meets_at_the_limit() -> None:
    slo = SloParams(ttft_p99_s=2.0, tpot_p99_s=0.05, goodput_fraction=0.9)
    assert breaches(level(2.0), slo) == []  # at the limit meets it
    assert breaches(level(2.01), slo) == [Breach("ttft_p99_s", 2.01, 2.0)]
    slow = {**level(1.0), "tpot_s": {"p99": 0.06}}
    assert [b.limit for b in breaches(slow, slo)] == ["tpot_p99_s"]
    assert breaches(level(1.0, good=9), slo) == []  # 0.9 of requests are goodput
    assert breaches(level(1.0, good=8), slo) == [Breach("goodput_fraction", 0.8, 0.9)]
    assert [b.limit for b in breaches(level(1.0, saturated=True), slo)] == ["saturated"]
    assert breaches(level(1.0, requests=3, failed=3), slo) == [Breach("no_answer")]


def test_a_percentile_limit_is_decided_by_its_interval_and_else_undetermined_never_broken() -> None:
    # Issue 68: a level of 4 requests has no upper end for its p99, and was "broke" whatever its TTFT.
    bounded = SloParams(ttft_p99_s=1.0)
    assert bounded.judged_by == "upper_bound"
    close = {**level(0.9), "ttft_s": {"p99": 0.9, "n": 400, "p99_ci": [0.8, 1.2]}}
    judged = judge(close, bounded)
    assert (judged.verdict, judged.breaches) == ("undetermined", [])  # the estimate meets, the bound not
    (undecided,) = judged.undecided
    assert (undecided.limit, undecided.samples, undecided.needed) == ("ttft_p99_s", 400, 800)
    assert (
        undecided.text() == "TTFT p99 [0.8, 1.2] s around 1 s from 400 request(s) (about 800 would decide it)"
    )
    assert judge(close, SloParams(ttft_p99_s=1.0, judged_by="estimate")).verdict == "met"
    few = {**level(0.5), "ttft_s": {"p99": 0.5, "n": 4, "p99_ci": [0.4, None]}}
    assert judge(few, bounded).verdict == "undetermined" and judge(few, bounded).needed() == 368
    over = {**level(3.0), "ttft_s": {"p99": 3.0, "n": 4, "p99_ci": [2.5, None]}}
    assert judge(over, bounded).breaches == [Breach("ttft_p99_s", 2.5, 1.0, low_end=True)]  # decided early
    assert breach_text(asdict(judge(over, bounded).breaches[0])) == "TTFT p99 2.5 s (its 95% low end) > 1 s"
    within = {**level(0.5), "ttft_s": {"p99": 0.5, "n": 400, "p99_ci": [0.4, 0.9]}}
    assert judge(within, bounded).verdict == "met"
    # a p50 or p90 limit is judged by its own interval: 6 requests can bound a median
    median = {**level(0.5), "ttft_s": {"p50": 0.3, "n": 6, "p50_ci": [0.2, 0.4]}}
    assert judge(median, SloParams(ttft_p50_s=0.5)).verdict == "met"
    assert judge(median, SloParams(ttft_p50_s=0.1)).verdict == "broke"
    # a broken limit beside an undecided one: broke
    both = {**over, "tpot_s": {"p99": 0.01, "n": 4, "p99_ci": [0.005, None]}}
    assert judge(both, SloParams(ttft_p99_s=1.0, tpot_p99_s=0.05)).verdict == "broke"
    assert slo_text(bounded.model_dump()) == "TTFT p99 <= 1 s (each percentile by its 95% interval)"
    assert slo_text({"ttft_p99_s": 1.0}) == "TTFT p99 <= 1 s"  # a search recorded before bounds
    assert slo_text({"ttft_p99_s": 1.0, "judged_by": "upper_bound"}) == (
        "TTFT p99 <= 1 s (each p99 by its 95% upper bound)"  # recorded before undetermined: as it was judged
    )
    assert slo_text(SloParams(goodput_fraction=0.9).model_dump()) == "goodput >= 0.9 of requests"
    # a breach recorded before undetermined existed still reads as it was written
    old = {"limit": "ttft_p99_s", "value": None, "bound": 1.0, "samples": 9}
    assert breach_text(old) == "TTFT p99: 9 request(s) give no 95% upper bound (368 needed)"


def test_an_undetermined_level_bounds_the_search_and_is_never_said_to_break_it() -> None:
    p = params(search="users", slo={"ttft_p99_s": 1.0})

    async def measure(users: float, run: int) -> dict[str, Any]:
        # 1 and 2 users decided within; 4 users straddle the limit at their cap; 3 users decided over it
        ci = {1: [0.1, 0.5], 2: [0.2, 0.9], 3: [1.2, 2.0], 4: [0.8, 1.6]}[int(users)]
        return {**level(ci[0]), "requests": 400, "ttft_s": {"p99": ci[0], "n": 400, "p99_ci": ci}}

    found = asyncio.run(search(p, 1, measure))
    assert [probe["level"] for probe in found["probes"]] == [1, 2, 4, 3]
    assert [probe["verdict"] for probe in found["probes"]] == ["met", "met", "undetermined", "broke"]
    assert (found["met"], found["above"], found["above_verdict"]) == (2, 3, "broke")
    assert found["broken"] == 3 and found["undetermined"] == [4]
    assert found["probes"][2]["requests"] == 400
    assert search_text(found).startswith(
        "2 users within TTFT p99 <= 1 s (each percentile by its 95% interval)"
    )
    assert "3 users broke it: TTFT p99 1.2 s (its 95% low end) > 1 s" in search_text(found)
    # no level decided: the lowest probed is undetermined, and said so
    blind = asyncio.run(search(p, 1, _straddling))
    assert blind["met"] is None and blind["above_verdict"] == "undetermined" and blind["broken"] is None
    text = search_text(blind)
    assert text.startswith("none shown to meet") and "1 users undetermined: TTFT p99 [" in text
    assert "broke" not in text


async def _straddling(users: float, run: int) -> dict[str, Any]:
    return {**level(0.9), "ttft_s": {"p99": 0.9, "n": 8, "p99_ci": [0.3, None]}}


def test_without_a_goodput_share_a_failed_request_breaks_the_slo() -> None:
    slo = SloParams(ttft_p99_s=2.0)
    assert breaches(level(1.0, failed=1), slo) == [Breach("failed", 1)]
    assert breach_text({"limit": "failed", "value": 1, "bound": None}) == "1 request(s) failed"
    assert breach_text({"limit": "ttft_p99_s", "value": 2.314, "bound": 2}) == "TTFT p99 2.31 s > 2 s"


def test_an_slo_needs_a_limit_and_a_search_needs_an_slo() -> None:
    with pytest.raises(ValidationError, match="slo sets no limit"):
        SloParams()
    with pytest.raises(ValidationError, match="search and slo go together"):
        params(search="users")
    with pytest.raises(ValidationError, match="whole numbers"):
        params(search="users", slo={"ttft_p99_s": 1}, search_from=1.5)
    with pytest.raises(ValidationError, match="give search_from or levels"):
        params(search="rate", slo={"ttft_p99_s": 1})


def test_users_bracket_then_bisect_to_adjacent_levels() -> None:
    # TTFT p99 grows 0.1 s a user: 6 users meet 0.65 s, 7 do not.
    p = params(search="users", slo={"ttft_p99_s": 0.65})
    result, calls = run_search(p, 1, lambda users, run: 0.1 * users)
    assert [c[0] for c in calls] == [1, 2, 4, 8, 6, 7]
    assert (result["met"], result["broken"]) == (6, 7)
    assert result["broken_by"] == [
        {"limit": "ttft_p99_s", "value": pytest.approx(0.7), "bound": 0.65, "samples": None, "low_end": False}
    ]
    assert result["stopped"] == "the bracket closed"
    assert (result["met_runs"], result["runs"]) == (1, 1)


def test_rates_bisect_geometrically_within_the_tolerance() -> None:
    p = params(search="rate", slo={"ttft_p99_s": 1.0}, search_from=1, search_tolerance=0.1)
    result, calls = run_search(p, 1.0, lambda rate, run: rate / 3.3)
    met, broken = result["met"], result["broken"]
    assert met <= 3.3 < broken and broken / met <= 1.1
    assert calls[:3] == [(1.0, 0), (2.0, 0), (4.0, 0)]
    assert all(f"{rate:.3g}" == f"{rate:g}" for rate, _ in calls)  # 3 significant figures: stable unit names


def test_a_first_level_that_breaks_halves_down() -> None:
    p = params(search="rate", slo={"ttft_p99_s": 1.0}, search_from=8)
    result, calls = run_search(p, 8.0, lambda rate, run: rate / 3.3)
    assert [c[0] for c in calls][:3] == [8.0, 4.0, 2.0]
    assert result["met"] <= 3.3 < result["broken"]
    nothing, _ = run_search(params(search="users", slo={"ttft_p99_s": 0.01}), 1, lambda u, r: 1.0)
    assert (nothing["met"], nothing["broken"], nothing["stopped"]) == (None, 1, "no level probed met the SLO")


def test_the_probe_budget_and_the_top_bound_the_search() -> None:
    p = params(search="users", slo={"ttft_p99_s": 0.65}, search_probes=4)
    result, calls = run_search(p, 1, lambda users, run: 0.1 * users)
    assert len(calls) == 4 and (result["met"], result["broken"]) == (4, 8)
    assert result["stopped"] == "the 4 probes were spent"
    top = params(search="users", slo={"ttft_p99_s": 100}, search_to=12)
    result, calls = run_search(top, 1, lambda users, run: 0.1 * users)
    assert [c[0] for c in calls] == [1, 2, 4, 8, 12]
    assert result["broken"] is None and result["stopped"].startswith("every level probed met")


def test_a_noisy_pass_above_a_break_never_becomes_the_answer() -> None:
    assert bracket([(1, True), (2, True), (4, False), (8, True)]) == (2, 4)


def test_the_level_found_is_repeated_and_the_runs_that_met_are_counted() -> None:
    p = params(search="users", slo={"ttft_p99_s": 0.65}, search_repeats=3)
    # the second repeat of 6 users is slower than the SLO
    result, calls = run_search(p, 1, lambda users, run: 0.1 * users + (0.1 if run == 2 else 0))
    assert calls[-2:] == [(6, 1), (6, 2)]
    assert (result["met_runs"], result["runs"]) == (2, 3)
    assert [r["met"] for r in result["repeats"]] == [True, False]


def test_a_resumed_search_replays_the_same_probes() -> None:
    p = params(search="users", slo={"ttft_p99_s": 0.65})
    first, calls = run_search(p, 1, lambda users, run: 0.1 * users)
    again, calls_again = run_search(p, 1, lambda users, run: 0.1 * users)
    assert first == again and calls == calls_again


def test_only_the_many_users_check_takes_a_search() -> None:
    from ctxbench.checks.trace.params import TraceParams

    with pytest.raises(ValidationError, match="search"):
        TraceParams(file="t.jsonl", search="users")
