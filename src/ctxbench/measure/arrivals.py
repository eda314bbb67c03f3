"""Open-loop arrivals: when each request is due (a rate, constant or Poisson; or a replayed trace's own
times), and what the records say about who fell behind, the client or the server.

An open-loop request is due at its scheduled time whatever the server is doing; its record's `enqueued_ns` is
that scheduled time, so `sent_ns - enqueued_ns` is the client's own lateness (prompts are built before the
first arrival). The server's side is the lag `end_ns - enqueued_ns`: while the server keeps up it does not
grow over the run; past saturation it grows steadily. For requests served first come first served at a
rate mu while they arrive at lambda > mu, request k is due at k/lambda and ends near k/mu, so the lag grows
by (lambda/mu - 1) seconds a second: the slope of lag against due time estimates lambda/mu - 1, whatever the
latency of one request. The slope is a resistant one (medians of thirds), so a single stalled request
does not read as saturation.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..records import RequestRecord
from .metrics import NS, percentile

Arrival = Literal["poisson", "constant"]


def due_times(rate: float, count: int, arrival: Arrival, seed: int) -> list[float]:
    """Seconds from the first arrival (0.0) for `count` requests at `rate` a second: evenly spaced, or a
    Poisson process (exponential gaps, seeded, so a rerun offers the same pattern)."""
    if count <= 0:
        return []
    if arrival == "constant":
        return [k / rate for k in range(count)]
    rng = random.Random(seed)
    times = [0.0]
    for _ in range(count - 1):
        times.append(times[-1] + rng.expovariate(rate))
    return times


def lateness_s(record: RequestRecord) -> float:
    """How late the client sent a request it had scheduled (sent - due)."""
    return (record.sent_ns - record.enqueued_ns) / NS


def departure_ns(record: RequestRecord) -> int:
    """When a request left the server: its last token's arrival (the kernel's receive stamp), else its end.
    Not `end_ns`: a busy client loop ends several streams late and together (seen under a CPU hog: the last
    tokens of 8 requests arrived over 130 ms, their ends within 28 ms), which is not the server's doing."""
    return record.chunks[-1].arrived_ns if record.chunks else record.end_ns


def lag_growth(records: Sequence[RequestRecord]) -> float | None:
    """How fast the lag of the k-th departure (`departure_ns`) behind the k-th due time grows with it, in
    seconds a second: about 0 while the server keeps up, lambda/mu - 1 past saturation. The k-th end is
    paired with the k-th due time (the horizontal distance between the arrival and the departure curves),
    not each request with its own: a server takes requests due within a few ms in whatever order its
    threads hand them over, and one request's own lag says nothing about the queue then. Tukey's resistant
    line: the slope between the medians of the first and the last third, so one request the host stalled
    is not a queue that grows, as it would be for a least-squares slope. None under 3 requests."""
    due = sorted(r.enqueued_ns / NS for r in records)
    ends = sorted(departure_ns(r) / NS for r in records)
    points = [(d, e - d) for d, e in zip(due, ends, strict=True)]
    if len(points) < 3:
        return None
    third = (len(points) + 1) // 3  # the outer groups a little larger when n is not a multiple of 3
    first, last = points[:third], points[-third:]
    run = statistics.median(x for x, _ in last) - statistics.median(x for x, _ in first)
    if run <= 0:
        return None
    return (statistics.median(y for _, y in last) - statistics.median(y for _, y in first)) / run


@dataclass(frozen=True)
class OpenLoop:
    """One offered rate's verdict, from its records."""

    offered_per_s: float  # the rate asked for
    realised_per_s: float | None  # the schedule's own: (requests - 1) / (last due - first due)
    lateness_p50_s: float | None
    lateness_p99_s: float | None
    lateness_max_s: float | None
    lag_growth: float | None
    sustained_per_s: float | None  # offered / (1 + lag growth) once saturated: what the server kept up with
    saturated: bool
    client_behind: bool


def open_loop(
    records: Sequence[RequestRecord], rate: float, *, saturation_lag_growth: float, behind_s: float
) -> OpenLoop:
    """The verdict at one rate: saturated when the lag grows faster than `saturation_lag_growth`; the
    client is behind when its p99 lateness exceeds `behind_s` (then the pattern offered was not the one
    asked for, and the figures describe the client as much as the server)."""
    due = sorted(r.enqueued_ns for r in records)
    realised = (len(due) - 1) / ((due[-1] - due[0]) / NS) if len(due) > 1 and due[-1] > due[0] else None
    late = [lateness_s(r) for r in records]
    growth = lag_growth(records)
    saturated = growth is not None and growth > saturation_lag_growth
    p99 = percentile(late, 99)
    return OpenLoop(
        offered_per_s=rate,
        realised_per_s=realised,
        lateness_p50_s=percentile(late, 50),
        lateness_p99_s=p99,
        lateness_max_s=max(late) if late else None,
        lag_growth=growth,
        sustained_per_s=rate / (1 + growth) if saturated and growth is not None else None,
        saturated=saturated,
        client_behind=p99 is not None and p99 > behind_s,
    )


def behind_threshold_s(rate: float) -> float:
    """A client is behind when its p99 lateness passes a tenth of the mean gap between arrivals, or 20 ms
    (below that, one event loop's scheduling noise on a busy host)."""
    return max(0.020, 0.1 / rate)
