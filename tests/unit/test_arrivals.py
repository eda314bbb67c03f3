"""Open-loop arrivals: the schedules offered, and the verdicts read from records (saturated, client late)."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from pydantic import ValidationError

from ctxbench.config.load_params import ThroughputParams
from ctxbench.measure.arrivals import behind_threshold_s, due_times, lag_growth, open_loop
from ctxbench.records import Chunk, RequestRecord

NS = 1_000_000_000


def record(due_s: float, sent_s: float, end_s: float) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{due_s}",
        endpoint="chat",
        url="http://127.0.0.1:1/v1/chat/completions",
        model="m",
        request_bytes=10,
        enqueued_ns=int(due_s * NS),
        sent_ns=int(sent_s * NS),
        end_ns=int(end_s * NS),
        http_status=200,
    )


def test_constant_arrivals_are_evenly_spaced() -> None:
    assert due_times(4.0, 5, "constant", seed=1) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_poisson_arrivals_are_seeded_and_average_the_rate() -> None:
    times = due_times(10.0, 5001, "poisson", seed=7)
    assert times == due_times(10.0, 5001, "poisson", seed=7)
    assert times != due_times(10.0, 5001, "poisson", seed=8)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert statistics.mean(gaps) == pytest.approx(0.1, rel=0.05)
    # exponential gaps: the standard deviation equals the mean (a constant schedule's is 0)
    assert statistics.stdev(gaps) == pytest.approx(0.1, rel=0.1)


def test_a_server_that_keeps_up_has_no_lag_growth() -> None:
    # every request takes 0.3 s, whenever it is due
    records = [record(k * 0.5, k * 0.5, k * 0.5 + 0.3) for k in range(20)]
    assert lag_growth(records) == pytest.approx(0.0, abs=1e-9)
    verdict = open_loop(records, 2.0, saturation_lag_growth=0.1, behind_s=behind_threshold_s(2.0))
    assert not verdict.saturated and not verdict.client_behind and verdict.sustained_per_s is None
    assert verdict.realised_per_s == pytest.approx(2.0)


def test_a_server_past_saturation_gains_lag_and_its_sustained_rate_is_recovered() -> None:
    # due at 10/s, served one after another at 4/s: request k ends at (k + 1) / 4
    records = [record(k / 10, k / 10, (k + 1) / 4) for k in range(40)]
    verdict = open_loop(records, 10.0, saturation_lag_growth=0.1, behind_s=behind_threshold_s(10.0))
    assert verdict.lag_growth == pytest.approx(10 / 4 - 1)
    assert verdict.saturated and verdict.sustained_per_s == pytest.approx(4.0)


def test_one_stalled_request_is_not_a_queue_that_grows() -> None:
    # 2/s, every answer in 0.3 s, except the last, which the host stalled for 3 s (a least-squares slope
    # over these 8 requests is 0.5: "saturated" at the threshold the rate sweep's test uses)
    records = [record(k * 0.5, k * 0.5, k * 0.5 + (3.3 if k == 7 else 0.3)) for k in range(8)]
    assert lag_growth(records) == pytest.approx(0.0)
    assert not open_loop(records, 2.0, saturation_lag_growth=0.1, behind_s=behind_threshold_s(2.0)).saturated


def test_a_burst_the_server_took_in_another_order_is_still_a_queue_that_grows() -> None:
    # 9 requests due 1 ms apart (1000/s), one slot at 0.1 s a request, taken last-due first (the order a
    # busy server's threads handed them over): each request's own lag falls with its due time
    records = [record(k / 1000, k / 1000, (9 - k) * 0.1) for k in range(9)]
    verdict = open_loop(records, 1000.0, saturation_lag_growth=0.1, behind_s=behind_threshold_s(1000.0))
    assert verdict.lag_growth == pytest.approx((0.1 - 0.001) / 0.001)
    assert verdict.saturated and verdict.sustained_per_s == pytest.approx(10.0)


def test_a_request_departs_with_its_last_token_not_when_a_busy_client_ends_it() -> None:
    # 8 requests due 1 ms apart, their last tokens 20 ms apart (one slot), all ended by the client loop at
    # 0.3 s together: the ends alone show no queue
    records = [
        record(k / 1000, k / 1000, 0.3).model_copy(
            update={"chunks": (Chunk(arrived_ns=int((k + 1) * 0.02 * NS)),)}
        )
        for k in range(8)
    ]
    ended = [r.model_copy(update={"chunks": ()}) for r in records]
    assert lag_growth(ended) == pytest.approx(-1.0)  # every lag shorter by the gap: "no queue"
    verdict = open_loop(records, 1000.0, saturation_lag_growth=0.5, behind_s=behind_threshold_s(1000.0))
    assert verdict.saturated and verdict.lag_growth == pytest.approx((0.02 - 0.001) / 0.001)


def test_one_request_stalled_mid_run_moves_the_slope_by_one_gap_at_most() -> None:
    # 2/s, every answer in 0.3 s, except the fourth, stalled past the end: the k-th end after it is one
    # request later, so the lag of the last third is one gap (0.5 s) more, over 2.5 s of due times
    records = [record(k * 0.5, k * 0.5, k * 0.5 + (9.0 if k == 3 else 0.3)) for k in range(8)]
    assert lag_growth(records) == pytest.approx(0.5 / 2.5)


def test_a_client_that_sent_late_is_named_not_blamed_on_the_server() -> None:
    # the client sent every request 0.3 s late (its loop was busy); the server answered each in 0.1 s
    records = [record(k * 0.5, k * 0.5 + 0.3, k * 0.5 + 0.4) for k in range(10)]
    verdict = open_loop(records, 2.0, saturation_lag_growth=0.1, behind_s=behind_threshold_s(2.0))
    assert verdict.client_behind and not verdict.saturated
    assert verdict.lateness_p99_s == pytest.approx(0.3)


def test_too_few_requests_give_no_lag_growth() -> None:
    assert lag_growth([record(0, 0, 1), record(1, 1, 2)]) is None


def test_the_many_users_schema_takes_rates_and_counts_their_requests() -> None:
    params = ThroughputParams(levels=[], rates=[2, 0.5], duration_s=10, requests_per_user=1)
    assert params.requests_at(2) == 20 and params.requests_at(0.5) == 5
    assert params.request_count() == 25
    assert ThroughputParams(levels=[2], requests_per_user=3, warmup_requests=1).request_count() == 8
    # a users search reads back the levels measured before it: only 4 users is new (1 and 2 are levels)
    slo = {"search": "users", "search_to": 4, "slo": {"ttft_p99_s": 1}}
    counted = ThroughputParams(levels=[1, 2], requests_per_user=2, warmup_requests=0, **slo).request_count()
    assert counted == (1 + 2 + 4) * 2
    with pytest.raises(ValidationError, match="levels and rates are both empty"):
        ThroughputParams(levels=[], rates=[])
    with pytest.raises(ValidationError, match="greater than 0"):
        ThroughputParams(rates=[0])
    with pytest.raises(ValidationError, match="arrival"):
        ThroughputParams(rates=[1], arrival="bursty")


def test_rates_of_capacity_scale_the_best_closed_loop_level_and_need_what_makes_them_known() -> None:
    from ctxbench.checks.throughput.check import offered_rates

    params = ThroughputParams(levels=[1, 2], rates_of_capacity=[4, 0.25], requests_per_rate=6)
    summary = {"levels": {"1": {"requests_per_s": 0.6}, "2": {"requests_per_s": 1.18}}}
    assert offered_rates(params, summary) == [0.295, 4.72]
    assert summary["capacity_requests_per_s"] == 1.18
    assert params.request_count() == 2 * 6  # the closed loop runs for duration_s: not counted in advance
    nothing = {"levels": {"1": {"requests_per_s": None}}}
    assert (
        offered_rates(params, nothing) == [] and "no closed-loop level answered" in nothing["rates_skipped"]
    )
    assert offered_rates(ThroughputParams(rates=[8, 0.5]), {"levels": {}}) == [0.5, 8]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"rates": [1], "rates_of_capacity": [1], "requests_per_rate": 3}, "not both"),
        ({"levels": [], "rates_of_capacity": [1], "requests_per_rate": 3}, "needs levels"),
        ({"rates_of_capacity": [1]}, "requests_per_rate"),
    ]
    for bad, words in cases:
        with pytest.raises(ValidationError, match=words):
            ThroughputParams(**bad)
