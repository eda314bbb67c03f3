"""The prefix-cache audit: was any "fresh" answer served from a cache, and was a conversation's reuse its own?

The seed's campaign got "250K" prompts back in under a second because a random seed was reused. This
audit reads a run's files alone and applies four tests:

1. Reported hits on fresh prompts (capacity, needle; not the later questions of a multi_depth document,
   which read it back from the cache by design): `cached_tokens` beyond the chat template around an
   empty message (`labels.template_tokens`, counted when the prompt was built: all fresh prompts can share)
   plus a slack. Runs recorded before that label take the smallest any fresh prompt reported, which a resume
   broke: its first prompt met a cold server (0 cached) and every later one was called a hit.
2. Too fast to be a prefill: each fresh prompt's implied prefill rate, (prompt - reported cached) / its
   prefill time (the engine's own prompt time where it states one, else the TTFT), against the run's median;
   a prompt more than `too_fast_factor` times faster was served from somewhere
   the server did not report (some engines do not report cached tokens at all).
3. Conversation reuse beyond its own history: a ramp turn whose cached tokens exceed what the same user's
   previous turn left in the cache (its context plus its reply).
4. A replayed trace's request served beyond what its hash ids imply (`checks/trace.py`).
It also reconciles the cached tokens the records report with the engine's own `/metrics` counter.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Literal

from .. import metrics
from ..engines.prom import common_metrics
from ..ramp_table import attempt_of
from ..records import RequestRecord
from ..store import RunDir

FRESH_CHECKS = ("capacity", "needle")
SHARED_PREFIX_SLACK = 16
TOO_FAST_FACTOR = 3.0
MIN_AUDITED_PROMPT = 512

Kind = Literal["fresh_cache_hit", "too_fast", "reuse_beyond_history", "reuse_beyond_trace"]


@dataclass(frozen=True)
class Finding:
    request_id: str
    kind: Kind
    detail: str


@dataclass(frozen=True)
class CacheAudit:
    run_id: str
    findings: tuple[Finding, ...]
    fresh_requests: int
    median_prefill_tokens_per_s: float | None
    records_cached_tokens: int | None  # None: no record's usage reported cached tokens (not 0)
    metrics_cached_tokens: float | None  # the engine's counter, after - before; None if it has none
    # users setting -> cached / intended over turns 2.. (intended reuse), over the turns that reported it
    ramp_hit_ratio: dict[str, float]
    # A replayed trace: the cached tokens its shared blocks imply (an unbounded cache) and those reported.
    trace_expected_tokens: int | None = None
    trace_reported_tokens: int | None = None


def _implied_rate(record: RequestRecord) -> float | None:
    # The engine's own time where it has one: TTFT adds HTTP, tokenizing and client scheduling, which a CPU
    # hog stretches unevenly; under one, a fresh 1,900-token prompt of the tiny model was called "too fast".
    prompt, seconds = metrics.prompt_tokens(record), metrics.engine_prompt_s(record) or metrics.ttft_s(record)
    if prompt is None or not seconds:
        return None
    return (prompt - (metrics.cached_tokens(record) or 0)) / seconds


def _counter(run: RunDir, label: str) -> float | None:
    path = run.path / f"metrics-{label}.json"
    if not path.exists():
        return None
    return common_metrics(json.loads(path.read_text())).get("prefix_cache_hits")


def audit_run(run: RunDir, too_fast_factor: float = TOO_FAST_FACTOR) -> CacheAudit:
    """Apply the four tests to one run directory."""
    records = [r for r in run.records() if r.ok]
    # a multi_depth document's later questions read it back from the cache on purpose: not fresh
    fresh = [
        r for r in records if r.labels.get("check") in FRESH_CHECKS and r.labels.get("reuse") != "document"
    ]
    findings: list[Finding] = []
    declared = [int(r.labels["template_tokens"]) for r in fresh if r.labels.get("template_tokens")]
    template = max(declared) if declared else min((metrics.cached_tokens(r) or 0 for r in fresh), default=0)
    for record in fresh:
        cached = metrics.cached_tokens(record) or 0
        if cached > template + SHARED_PREFIX_SLACK:
            findings.append(
                Finding(
                    record.request_id,
                    "fresh_cache_hit",
                    f"{cached} of {metrics.prompt_tokens(record)} prompt tokens came from the cache "
                    f"(fresh prompts share {template})",
                )
            )
    rates = {
        r.request_id: _implied_rate(r) for r in fresh if (metrics.prompt_tokens(r) or 0) >= MIN_AUDITED_PROMPT
    }
    known = [rate for rate in rates.values() if rate is not None]
    median = statistics.median(known) if known else None
    if median is not None and len(known) >= 3:
        for request_id, rate in rates.items():
            if rate is not None and rate > too_fast_factor * median:
                findings.append(
                    Finding(
                        request_id,
                        "too_fast",
                        f"implied prefill {rate:.0f} tokens/s, {rate / median:.1f}x the run's median "
                        f"{median:.0f}: served from a cache the server did not report",
                    )
                )
    findings += _ramp_findings(records)
    trace = [r for r in records if r.labels.get("check") == "trace"]
    findings += _trace_findings(trace)
    before, after = _counter(run, "before"), _counter(run, "after")
    return CacheAudit(
        run_id=run.run_id,
        findings=tuple(findings),
        fresh_requests=len(fresh),
        median_prefill_tokens_per_s=median,
        records_cached_tokens=reported_cached_tokens(records),
        metrics_cached_tokens=None if before is None or after is None else after - before,
        ramp_hit_ratio=_hit_ratios(records),
        trace_expected_tokens=sum(int(r.labels["expected_cached_tokens"]) for r in trace) if trace else None,
        trace_reported_tokens=reported_cached_tokens(trace),
    )


def reported_cached_tokens(records: list[RequestRecord]) -> int | None:
    """The cached tokens the records' `usage` reported, summed; None when none of them reported any (vLLM
    without `--enable-prompt-tokens-details`): not reported is not zero."""
    reported = [c for c in (metrics.cached_tokens(r) for r in records) if c is not None]
    return sum(reported) if reported else None


def _trace_findings(records: list[RequestRecord]) -> list[Finding]:
    """A replayed request served from the cache beyond what the trace implies: its shared whole blocks,
    plus the prefix every prompt shares (template, lead: the overhead) and the next block's start (a cut
    block begins like the whole one of the same id)."""
    findings = []
    for record in records:
        expected = int(record.labels["expected_cached_tokens"])
        allowed = expected + int(record.labels["overhead_tokens"]) + int(record.labels["block_tokens"])
        cached = metrics.cached_tokens(record) or 0
        if cached > allowed + SHARED_PREFIX_SLACK:
            findings.append(
                Finding(
                    record.request_id,
                    "reuse_beyond_trace",
                    f"{cached} prompt tokens came from the cache; the trace implies at most {allowed}",
                )
            )
    return findings


def _hit_ratios(records: list[RequestRecord]) -> dict[str, float]:
    """Per ramp users setting: cached tokens / intended (the history each turn was meant to reuse)."""
    sums: dict[str, list[int]] = {}
    for record in records:
        intended = int(record.labels.get("intended_cached_tokens", "0") or 0)
        cached = metrics.cached_tokens(record)
        if record.labels.get("check") == "ramp" and intended > 0 and cached is not None:
            entry = sums.setdefault(record.labels["users"], [0, 0])
            entry[0] += min(cached, intended)
            entry[1] += intended
    return {users: hit / intended for users, (hit, intended) in sums.items() if intended}


def _ramp_findings(records: list[RequestRecord]) -> list[Finding]:
    findings = []
    previous: dict[tuple[str, str, str], RequestRecord] = {}
    ramp = sorted(
        (r for r in records if r.labels.get("check") == "ramp"), key=lambda r: int(r.labels["turn"])
    )
    for record in ramp:
        key = (record.labels["users"], record.labels["user"], str(attempt_of(record.request_id)))
        earlier = previous.get(key)
        previous[key] = record
        if earlier is None:
            continue
        out = metrics.output_tokens(earlier)
        own = (metrics.prompt_tokens(earlier) or 0) + (out.tokens if out else 0) + SHARED_PREFIX_SLACK
        cached = metrics.cached_tokens(record) or 0
        if cached > own:
            findings.append(
                Finding(
                    record.request_id,
                    "reuse_beyond_history",
                    f"{cached} cached tokens, but this user's history held at most {own}",
                )
            )
    return findings
