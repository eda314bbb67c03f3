"""The figures of one stage of an llm-d report (`llmd_report.py`), computed from its records with ctxbench's
own definitions (docs/metrics.md): `request_performance.aggregate`, v0.2.1's `session_performance`, and the
most requests a stage had in flight."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..checks.catalog import CHECKS_BY_NAME
from ..measure import metrics
from ..records import RequestRecord
from .llmd_schema import Statistics

PERCENTILES = (
    ("p0p1", 0.1), ("p1", 1), ("p5", 5), ("p10", 10), ("p25", 25), ("p50", 50),
    ("p75", 75), ("p90", 90), ("p95", 95), ("p99", 99), ("p99p9", 99.9),
)  # fmt: skip


def _stat(units: str, values: Iterable[float | None]) -> Statistics | None:
    """Upstream's Statistics over the values present: mean, population standard deviation (NumPy's
    default), min, max and every percentile upstream names."""
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    mean = sum(present) / len(present)
    spread = math.sqrt(sum((v - mean) ** 2 for v in present) / len(present))
    quantiles = {name: metrics.percentile(present, q) for name, q in PERCENTILES}
    return Statistics.model_validate(
        {"units": units, "mean": mean, "stddev": spread, "min": present[0], "max": present[-1], **quantiles}
    )


def _rate(units: str, amount: float, window_s: float) -> Statistics | None:
    return Statistics(units=units, mean=amount / window_s) if window_s > 0 else None


def _total(values: Sequence[int | None]) -> int | None:
    """The sum, or None where any count was not reported (a rate from part of them would be too low)."""
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)


def _ntpot_s(record: RequestRecord) -> float | None:
    """Upstream's NTPOT: end-to-end latency over every output token, the first included."""
    tokens = metrics.output_tokens(record)
    return None if tokens is None or tokens.tokens < 1 else metrics.e2e_s(record) / tokens.tokens


def peak_in_flight(records: Sequence[RequestRecord]) -> int:
    """The most requests of `records` in flight at once (sent, not yet ended), from their own stamps."""
    events = sorted([(r.sent_ns, 1) for r in records] + [(r.end_ns, -1) for r in records])
    most = current = 0
    for _, step in events:  # an end and a send at one instant: the end first (-1 sorts before 1)
        current += step
        most = max(most, current)
    return most


def _session_key(record: RequestRecord) -> str | None:
    """The conversation a multi-turn stage's request belongs to, as its check says (`Check.conversation`);
    None outside one."""
    check = CHECKS_BY_NAME.get(record.check)
    return None if check is None else check.conversation(record.labels)


def sessions(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """v0.2.1's `session_performance` for a stage whose requests are conversations; None otherwise. A
    session succeeded when every one of its requests did; its tokens are left out where any count was not
    reported."""
    by_session: dict[str, list[RequestRecord]] = {}
    for record in records:
        key = _session_key(record)
        if key is not None:
            by_session.setdefault(key, []).append(record)
    if not by_session:
        return None
    groups = list(by_session.values())
    inputs = [_total([metrics.prompt_tokens(r) for r in group]) for group in groups]
    outputs = [
        _total([None if (n := metrics.output_tokens(r)) is None else n.tokens for r in group])
        for group in groups
    ]
    return {
        "sessions": {
            "total": len(groups),
            "succeeded": sum(1 for group in groups if all(r.ok for r in group)),
            "failed": sum(1 for group in groups if not all(r.ok for r in group)),
            "total_events": sum(len(group) for group in groups),
            "total_events_completed": sum(1 for group in groups for r in group if r.ok),
            "session_duration": _stat(
                "s",
                (
                    (max(r.end_ns for r in group) - min(r.sent_ns for r in group)) / metrics.NS
                    for group in groups
                ),
            ),
            "events_per_session": _stat("count", (len(group) for group in groups)),
            "input_tokens_per_session": None if None in inputs else _stat("count", inputs),
            "output_tokens_per_session": None if None in outputs else _stat("count", outputs),
        }
    }


def aggregate(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The schema's `request_performance.aggregate` over one stage's records. A count the server did not
    report is left out (the field absent), never 0."""
    ok = [r for r in records if r.ok]
    window = (max(r.end_ns for r in records) - min(r.sent_ns for r in records)) / metrics.NS
    prompt = [metrics.prompt_tokens(r) for r in ok]
    output = [None if (n := metrics.output_tokens(r)) is None else n.tokens for r in ok]
    prompt_total, output_total = _total(prompt), _total(output)
    both = None if prompt_total is None or output_total is None else prompt_total + output_total
    rate = lambda units, amount: None if amount is None else _rate(units, amount, window)  # noqa: E731
    return {
        "requests": {
            "total": len(records),
            "failures": sum(1 for r in records if r.error is not None and r.error.kind != "interrupted"),
            "incomplete": sum(1 for r in records if r.error is not None and r.error.kind == "interrupted"),
            "input_length": _stat("count", prompt),
            "output_length": _stat("count", output),
        },
        "latency": {
            "time_to_first_token": _stat("s", (metrics.ttft_s(r) for r in ok)),
            "normalized_time_per_output_token": _stat("s/token", (_ntpot_s(r) for r in ok)),
            "time_per_output_token": _stat("s/token", (metrics.tpot_s(r) for r in ok)),
            "inter_token_latency": _stat(
                "s/token", (g.gap_s for r in ok for g in metrics.itl(r) if g.chunks == 1)
            ),
            "request_latency": _stat("s", (metrics.e2e_s(r) for r in ok)),
        },
        "throughput": {
            "input_token_rate": rate("tokens/s", prompt_total),
            "output_token_rate": rate("tokens/s", output_total),
            "total_token_rate": rate("tokens/s", both),
            "request_rate": _rate("queries/s", len(ok), window),
        },
    }
