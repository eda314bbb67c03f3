"""The steady-state window of a closed-loop level (steady.py): found from sends and ends alone, and the
figures over it, on records built with known times."""

from __future__ import annotations

import pytest
from built_records import NS, request

from ctxbench.measure.steady import in_flight, steady_state
from ctxbench.records import RequestRecord


def two_users() -> list[RequestRecord]:
    # user a: 0-2, 2-4, 4-6; user b starts late (1 s) and ends late: 1-3, 3-5, 5-9 (a drain of 3 s alone)
    a = [request(f"a{i}", 2 * i, 2 * i + 2) for i in range(3)]
    b = [request("b0", 1, 3), request("b1", 3, 5), request("b2", 5, 9)]
    return a + b


def test_the_window_is_where_both_users_were_in_flight() -> None:
    records = two_users()
    assert in_flight(records)[:3] == [(0, 1), (1 * NS, 2), (2 * NS, 2)]  # an end and a send at once: still 2
    steady = steady_state(records)
    assert steady is not None and steady.plateau == 2
    assert steady.start_s == pytest.approx(1.0) and steady.window_s == pytest.approx(5.0)  # 1 s .. 6 s
    assert steady.cut_s == pytest.approx(9.0 - 5.0)  # the whole level ran 0 .. 9 s
    # sent inside: a1 (2 s), a2 (4 s), b0 (1 s), b1 (3 s), b2 (5 s); a0 was sent at 0 s, before it
    assert steady.requests == 5
    # ended inside 1..6 s: a0 (2), a1 (4), a2 (6), b0 (3), b1 (5)
    assert steady.requests_per_s == pytest.approx(5 / 5.0)
    assert steady.ttft_s.p50 == pytest.approx(0.1)


def test_output_tokens_are_counted_where_their_chunks_arrived() -> None:
    records = two_users()
    steady = steady_state(records)
    assert steady is not None
    inside = sum(1 for r in records for c in r.chunks if 1 * NS <= c.arrived_ns <= 6 * NS)
    assert steady.output_tokens_per_s == pytest.approx(inside / 5.0)


def test_a_level_without_a_held_count_has_no_window() -> None:
    assert steady_state([]) is None
    one = steady_state([request("a", 0, 2), request("b", 2, 4)])
    assert one is not None and one.plateau == 1 and one.cut_s == pytest.approx(0.0)
