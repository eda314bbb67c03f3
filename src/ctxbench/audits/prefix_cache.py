"""The prefix-cache audit: did any request take more from a cache than the check that sent it declared?

The seed's campaign got "250K" prompts back in under a second because a random seed was reused. Every request
a check sends carries its `CacheIntent` (records.py): fresh (nothing beyond the lead every prompt of the check
shares), or reuse of named tokens up to a bound. This audit reads a run's files alone and applies these tests
to every request of every check:

1. Beyond its intent: the cached tokens the engine reported (`usage`, else llama.cpp's own
   `timings.cache_n`) over the request's `allowed_tokens` plus a slack: `fresh_cache_hit` for a fresh prompt,
   `reuse_beyond_intent` for declared reuse. A check with a rule of its own (`Check.reuse_bound`: a
   replayed trace's, the order its requests ran in, `checks/trace/cache.py`) is held to it:
   `reuse_beyond_rule`.
2. Too fast to be a prefill, where the engine states nothing of its cache for a fresh prompt (no cached tokens
   and no timings): its implied rate, (prompt - lead) / TTFT, against the 75th percentile of the other fresh
   prompts' rates (host load only slows a prefill, so the fast end is the one to measure against; a cached
   "250K" prompt is tens of times faster). Where the engine reports what it computed, its count decides and
   no timing is judged: an engine's own prompt time for identical prompts varied 18-683 ms on a busy host.
3. Undeclared: a request of a check recorded without its intent (a code path that escaped the rule).
4. One request id, one request: an id recorded twice in an attempt.
5. The engine's own word, per check: its prefix-cache hit counter over the check (`/metrics` before and
   after it, `counters.counter_windows`) against the sum of what the check's requests were allowed, where
   every one of them declared a bound: `counter_beyond_intent`. This is the test that still holds where the
   records say nothing of the cache (vLLM without `--enable-prompt-tokens-details`), and it sees requests
   no record names.

Records made before version 3 carry no intent; the rules of their time apply to them unchanged (fresh for
capacity and needle by their labels, a ramp turn against its user's previous turn, a trace line against its
hash ids), so recorded runs audit as they did. The audit also reconciles the cached tokens the records report
with the engine's own `/metrics` counter.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from ..checks.catalog import CHECKS
from ..checks.ramp import RAMP, RampLabels
from ..checks.trace import TRACE, implied_cached
from ..engines.prom import common_metrics
from ..labels import LabelModel
from ..measure import metrics
from ..records import CACHE_SLACK_TOKENS, RequestRecord
from ..store.counters import CheckCounters, counter_windows
from ..store.run_dir import RunDir, attempt_of

# the fresh checks, for records made before version 3 (no intent)
FRESH_CHECKS = tuple(check.name for check in CHECKS if check.fresh_only)
TOO_FAST_FACTOR = 3.0
MIN_AUDITED_PROMPT = 512
MIN_RATES = 4  # other fresh prompts a rate is judged against

Kind = Literal[
    "fresh_cache_hit",
    "too_fast",
    "reuse_beyond_history",
    "reuse_beyond_intent",
    "reuse_beyond_rule",
    "undeclared",
    "duplicate_request_id",
    "counter_beyond_intent",
]


@dataclass(frozen=True)
class Finding:
    request_id: str
    kind: Kind
    detail: str


@dataclass(frozen=True)
class CounterBound:
    """One check of one attempt: the engine's prefix-cache hits over it and what its requests were allowed
    (`allowed` None: some request's reuse has no bound, or none declared one; not judged)."""

    check: str
    attempt: int
    engine_hits: float
    allowed: int | None
    requests: int
    uncertainty: float = 0.0  # how far the engine's printed counter may be from its count

    @property
    def exceeded(self) -> bool:
        return self.allowed is not None and (
            self.engine_hits > self.allowed + CACHE_SLACK_TOKENS * self.requests + self.uncertainty
        )


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
    audited_requests: int = 0  # requests held to a declared bound
    unbounded_requests: int = 0  # requests whose declared reuse has no bound (a user's prompts, the probe)
    counter_bounds: tuple[CounterBound, ...] = ()  # per check and attempt, where the engine has the counter


def engine_cached_tokens(record: RequestRecord) -> int | None:
    """Prompt tokens the engine says came from its cache: `usage`'s cached tokens, else llama.cpp's own
    `timings.cache_n`; None where the engine says neither."""
    cached = metrics.cached_tokens(record)
    if cached is not None:
        return cached
    cache_n = (record.server_timings or {}).get("cache_n")
    return cache_n if isinstance(cache_n, int) else None


def _implied_rate(record: RequestRecord, lead: int) -> float | None:
    """(prompt - cached) / TTFT, the cached tokens as reported, else the lead: a fresh prompt's prefill rate
    as the client sees it."""
    prompt, seconds = metrics.prompt_tokens(record), metrics.ttft_s(record)
    if prompt is None or not seconds:
        return None
    cached = engine_cached_tokens(record)
    return (prompt - (lead if cached is None else cached)) / seconds


def _counter(run: RunDir, label: str) -> float | None:
    path = run.path / f"metrics-{label}.json"
    if not path.exists():
        return None
    return common_metrics(json.loads(path.read_text())).get("prefix_cache_hits")


def audit_run(run: RunDir, too_fast_factor: float = TOO_FAST_FACTOR) -> CacheAudit:
    """Apply the tests to one run directory."""
    every = list(run.records())
    records = [r for r in every if r.ok]
    declared = [r for r in records if r.cache is not None]
    legacy = [r for r in records if r.cache is None and r.record_version < 3]
    findings = _duplicates(every)
    findings += [
        Finding(r.request_id, "undeclared", f"a {r.check} request recorded with no cache intent")
        for r in records
        if r.cache is None and r.record_version >= 3 and r.check
    ]
    # a check with a rule of its own (the trace: what ran before each request) is held to it, not its intents
    ruled = {
        check.name: bound
        for check in CHECKS
        if (bound := check.reuse_bound([r for r in every if r.check == check.name])) is not None
    }
    findings += _intent_findings([r for r in declared if r.check not in ruled])
    legacy_fresh, lead = _legacy_fresh(legacy)
    findings += _fresh_hits(legacy_fresh, lead)
    fresh = [(r, lead) for r in legacy_fresh] + [
        (r, r.cache.lead_tokens) for r in declared if r.cache is not None and r.cache.reuse == "fresh"
    ]
    too_fast, median = _too_fast(fresh, too_fast_factor)
    findings += too_fast
    findings += _ramp_findings([r for r in legacy if r.check == RAMP.name])
    findings += _rule_findings([r for r in every if r.check in ruled], ruled)
    trace = [r for r in every if r.check == TRACE.name]
    bounds = counter_bounds(counter_windows(run), every)
    findings += [
        Finding(
            f"{bound.check} (attempt {bound.attempt})",
            "counter_beyond_intent",
            f"the engine's prefix-cache hit counter rose by {bound.engine_hits:.0f} tokens over the check; "
            f"its {bound.requests} request(s) were allowed {bound.allowed} in all "
            f"(and {CACHE_SLACK_TOKENS} each)",
        )
        for bound in bounds
        if bound.exceeded
    ]
    before, after = _counter(run, "before"), _counter(run, "after")
    trace_ok = [r for r in trace if r.ok]
    return CacheAudit(
        run_id=run.run_id,
        findings=tuple(findings),
        fresh_requests=len(fresh),
        median_prefill_tokens_per_s=median,
        records_cached_tokens=reported_cached_tokens(records),
        metrics_cached_tokens=None if before is None or after is None else after - before,
        ramp_hit_ratio=_hit_ratios(records),
        trace_expected_tokens=_trace_expected(trace) if trace_ok else None,
        trace_reported_tokens=reported_cached_tokens(trace_ok) if trace_ok else None,
        audited_requests=sum(r.cache is not None and r.cache.allowed_tokens is not None for r in declared),
        unbounded_requests=sum(r.cache is not None and r.cache.allowed_tokens is None for r in declared),
        counter_bounds=tuple(bounds),
    )


def counter_bounds(windows: list[CheckCounters], records: list[RequestRecord]) -> list[CounterBound]:
    """Per check and attempt with both snapshots and a prefix-cache counter: the counter's rise against the
    sum of the `allowed_tokens` of every request the check sent in that attempt, failed ones included (an
    engine counts what it reused for a request that then failed)."""
    bounds = []
    for window in windows:
        hits = window.deltas.get("prefix_cache_hits")
        mine = [r for r in records if r.check == window.check and attempt_of(r.request_id) == window.attempt]
        if hits is None or not mine:
            continue  # a unit of a check (a level), the run as a whole, or an engine without the counter
        allowed = [r.cache.allowed_tokens if r.cache is not None else None for r in mine]
        bounds.append(
            CounterBound(
                window.check,
                window.attempt,
                hits,
                None if None in allowed else sum(a or 0 for a in allowed),
                len(mine),
                window.uncertainty.get("prefix_cache_hits", 0.0),
            )
        )
    return bounds


def _duplicates(records: list[RequestRecord]) -> list[Finding]:
    """Request ids recorded more than once (the store refuses them now; a run made before it did not)."""
    counts = Counter(r.request_id for r in records)
    return [
        Finding(request_id, "duplicate_request_id", f"recorded {n} times: one request id is one request")
        for request_id, n in counts.items()
        if n > 1
    ]


def _intent_findings(records: list[RequestRecord]) -> list[Finding]:
    findings = []
    for record in records:
        intent = record.cache
        assert intent is not None
        cached = engine_cached_tokens(record)
        if intent.exceeded_by(cached):
            fresh = intent.reuse == "fresh"
            findings.append(
                Finding(
                    record.request_id,
                    "fresh_cache_hit" if fresh else "reuse_beyond_intent",
                    f"{cached} of {metrics.prompt_tokens(record)} prompt tokens came from the cache; "
                    f"{intent.why} may take at most {intent.allowed_tokens}",
                )
            )
    return findings


class _FreshLabels(LabelModel):
    """What a fresh check's record carried before version 3: the template its prompt shares (from 2026-12-04),
    and a needle question asked again of a document already sent (`reuse = "document"`)."""

    template_tokens: int | None = None
    reuse: str | None = None


def _legacy_fresh(records: list[RequestRecord]) -> tuple[list[RequestRecord], int]:
    """Records made before version 3: the fresh prompts by their check's labels, and the template they
    share (`labels.template_tokens`; runs recorded before that label take the smallest any fresh prompt
    reported)."""
    tags = {r.request_id: _FreshLabels.of(r) for r in records if r.check in FRESH_CHECKS}
    fresh = [r for r in records if r.request_id in tags and tags[r.request_id].reuse != "document"]
    labelled = [t for r in fresh if (t := tags[r.request_id].template_tokens)]
    template = max(labelled) if labelled else min((metrics.cached_tokens(r) or 0 for r in fresh), default=0)
    return fresh, template


def _fresh_hits(fresh: list[RequestRecord], template: int) -> list[Finding]:
    findings = []
    for record in fresh:
        cached = metrics.cached_tokens(record) or 0
        if cached > template + CACHE_SLACK_TOKENS:
            findings.append(
                Finding(
                    record.request_id,
                    "fresh_cache_hit",
                    f"{cached} of {metrics.prompt_tokens(record)} prompt tokens came from the cache "
                    f"(fresh prompts share {template})",
                )
            )
    return findings


def _too_fast(fresh: list[tuple[RequestRecord, int]], factor: float) -> tuple[list[Finding], float | None]:
    """Fresh prompts of which the engine states nothing (no cached tokens, no timings), each against the
    75th percentile of the other fresh prompts' rates; returns the findings and the median rate."""
    long = [(r, lead) for r, lead in fresh if (metrics.prompt_tokens(r) or 0) >= MIN_AUDITED_PROMPT]
    rates = {r.request_id: rate for r, lead in long if (rate := _implied_rate(r, lead)) is not None}
    silent = {r.request_id for r, _ in long if engine_cached_tokens(r) is None}
    findings = []
    for request_id, rate in rates.items():
        if request_id not in silent:
            continue
        others = [other for key, other in rates.items() if key != request_id]
        if len(others) < MIN_RATES:
            continue
        fast_end = statistics.quantiles(others, n=4, method="inclusive")[2]
        if rate > factor * fast_end:
            findings.append(
                Finding(
                    request_id,
                    "too_fast",
                    f"implied prefill {rate:.0f} tokens/s, {rate / fast_end:.1f}x the fast end (75th "
                    f"percentile) of the run's other fresh prompts, {fast_end:.0f}: served from a cache the "
                    "server did not report",
                )
            )
    return findings, statistics.median(rates.values()) if rates else None


def reported_cached_tokens(records: list[RequestRecord]) -> int | None:
    """The cached tokens the records' `usage` reported, summed; None when none of them reported any (vLLM
    without `--enable-prompt-tokens-details`): not reported is not zero."""
    reported = [c for c in (metrics.cached_tokens(r) for r in records) if c is not None]
    return sum(reported) if reported else None


def _trace_expected(records: list[RequestRecord]) -> int:
    implied = implied_cached(records)
    return sum(implied[r.request_id] for r in records if r.ok)


def _rule_findings(records: list[RequestRecord], ruled: dict[str, dict[str, int]]) -> list[Finding]:
    """A request served from the cache beyond its check's own rule (`Check.reuse_bound`; the trace's: its
    shared whole blocks with requests that reached the server before it ended, the lead every prompt shares,
    and the next block's start)."""
    findings = []
    for record in records:
        cached = engine_cached_tokens(record) if record.cache is not None else metrics.cached_tokens(record)
        allowed = ruled[record.check][record.request_id]
        if record.ok and (cached or 0) > allowed + CACHE_SLACK_TOKENS:
            findings.append(
                Finding(
                    record.request_id,
                    "reuse_beyond_rule",
                    f"{cached} prompt tokens came from the cache; the {record.check} check's own rule "
                    f"(`Check.reuse_bound`) allows at most {allowed}",
                )
            )
    return findings


def _hit_ratios(records: list[RequestRecord]) -> dict[str, float]:
    """Per ramp users setting: cached tokens / intended (the history each turn was meant to reuse)."""
    sums: dict[str, list[int]] = {}
    for record in (r for r in records if r.check == RAMP.name):
        labels = RampLabels.of(record)
        intended = labels.intended_cached_tokens or 0
        cached = metrics.cached_tokens(record)
        if intended > 0 and cached is not None:
            entry = sums.setdefault(str(labels.users), [0, 0])
            entry[0] += min(cached, intended)
            entry[1] += intended
    return {users: hit / intended for users, (hit, intended) in sums.items() if intended}


def _ramp_findings(records: list[RequestRecord]) -> list[Finding]:
    findings = []
    previous: dict[tuple[int | None, int | None, int], RequestRecord] = {}
    labelled = [(r, RampLabels.of(r)) for r in records if r.check == RAMP.name]
    for record, labels in sorted(labelled, key=lambda pair: pair[1].turn or 0):
        key = (labels.users, labels.user, attempt_of(record.request_id))
        earlier = previous.get(key)
        previous[key] = record
        if earlier is None:
            continue
        out = metrics.output_tokens(earlier)
        own = (metrics.prompt_tokens(earlier) or 0) + (out.tokens if out else 0) + CACHE_SLACK_TOKENS
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
