"""Steady state: a closed-loop level's figures over the window where its users were all in flight.

A level starts with users arriving (a few milliseconds of jitter, then each user's first prefill) and ends
with a drain: users that finished their last request wait while the others finish theirs, so the server
runs below the level's concurrency. Whole-level figures include both; at short levels they understate
throughput and mix drain-time latencies into the tails. SGLang's `steady_state_serving.py`, vllm-bench's
plateau and AIPerf's active-window tables drop them the same way.

The rule (docs/metrics.md, "Steady state"):
- in flight at time t = the requests sent at or before t and not yet ended (records' `sent_ns`, `end_ns`);
- the plateau is the largest count held for at least a tenth of the level's window (its concurrency when
  the users keep the server busy), and the steady window runs from the first instant the count reaches
  `ceil((1 - tolerance) x plateau)` to the last instant it is still there (tolerance 0.1: all of 2 users,
  9 of 10, 58 of 64);
- over that window: output tokens whose chunks arrived inside it / its length (each request's tokens spread
  evenly over its chunks), requests ended inside it / its length, and TTFT and TPOT of the requests sent
  inside it. `cut_s` is the whole window minus the steady one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..records import RequestRecord
from .metrics import NS, Distribution, output_tokens, tpot_s, ttft_s

TOLERANCE = 0.1
PLATEAU_SHARE = 0.1  # of the level's window a count must be held to be its plateau


@dataclass(frozen=True)
class Steady:
    plateau: int  # requests in flight the level held
    start_s: float  # after the level's first send
    window_s: float
    cut_s: float  # the whole level's window minus this one
    requests: int  # sent inside the window
    output_tokens_per_s: float | None
    requests_per_s: float | None
    ttft_s: Distribution
    tpot_s: Distribution


def in_flight(records: Sequence[RequestRecord]) -> list[tuple[int, int]]:
    """(instant ns, requests in flight from then on), at every send and end, in time order (an end before a
    send at the same instant: the closed loop's next request follows its previous one)."""
    events = sorted(
        [(r.sent_ns, 1) for r in records if r.end_ns >= r.sent_ns]
        + [(r.end_ns, -1) for r in records if r.end_ns >= r.sent_ns]
    )
    steps: list[tuple[int, int]] = []
    count = 0
    for instant, change in events:
        count += change
        if steps and steps[-1][0] == instant:
            steps[-1] = (instant, count)
        else:
            steps.append((instant, count))
    return steps


@dataclass(frozen=True)
class _Window:
    plateau: int
    first: int  # ns: the level's first send
    last: int  # ns: its last end
    start: int  # ns: the steady window's
    end: int


def _window(records: Sequence[RequestRecord], tolerance: float) -> _Window | None:
    """The level's steady window (the module's rule), or None without one (no records, or no count held long
    enough)."""
    steps = in_flight(records)
    if len(steps) < 2:
        return None
    first, last = steps[0][0], steps[-1][0]
    held: dict[int, int] = {}
    for (instant, count), (following, _) in zip(steps, steps[1:], strict=False):
        held[count] = held.get(count, 0) + following - instant
    long_enough = [count for count, ns in held.items() if count > 0 and ns >= PLATEAU_SHARE * (last - first)]
    if not long_enough:
        return None
    plateau = max(long_enough)
    floor = max(1, math.ceil((1 - tolerance) * plateau))
    inside = [i for i, (_, count) in enumerate(steps) if count >= floor]
    start, end = steps[inside[0]][0], steps[inside[-1] + 1][0]
    return _Window(plateau, first, last, start, end) if end > start else None


def steady_requests(records: Sequence[RequestRecord], tolerance: float = TOLERANCE) -> list[RequestRecord]:
    """The successful requests sent inside the level's steady window: those its TTFT and TPOT are over."""
    window = _window(records, tolerance)
    if window is None:
        return []
    return [r for r in records if r.ok and window.start <= r.sent_ns <= window.end]


def steady_state(records: Sequence[RequestRecord], tolerance: float = TOLERANCE) -> Steady | None:
    """The level's steady-state figures (the module's rule), or None without a window (no records, or no
    count held long enough)."""
    w = _window(records, tolerance)
    if w is None:
        return None
    start, end = w.start, w.end
    window = (end - start) / NS
    ok = [r for r in records if r.ok]
    tokens = 0.0
    for record in ok:
        produced = output_tokens(record)
        if produced is not None and record.chunks:
            share = produced.tokens / len(record.chunks)
            tokens += share * sum(1 for c in record.chunks if start <= c.arrived_ns <= end)
    sent = steady_requests(records, tolerance)
    return Steady(
        plateau=w.plateau,
        start_s=(start - w.first) / NS,
        window_s=window,
        cut_s=(w.last - w.first) / NS - window,
        requests=len(sent),
        output_tokens_per_s=tokens / window,
        requests_per_s=sum(1 for r in ok if start <= r.end_ns <= end) / window,
        ttft_s=Distribution.of((ttft_s(r) for r in sent), bounds=True),
        tpot_s=Distribution.of((tpot_s(r) for r in sent), bounds=True),
    )
