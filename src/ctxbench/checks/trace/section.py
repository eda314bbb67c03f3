"""The run report's trace-replay section (load figures, the client's lateness, the cached tokens the trace's
shared blocks imply against those the server reported) and its console line."""

from __future__ import annotations

from ...measure import metrics
from ...render.run_read import RunRead
from ...render.tables import BOUNDS_NOTE, bounded_text, fmt, lateness_text, relative, stats_text
from ...store.counters import reported_text
from ...store.run_dir import RunDir
from .file import TraceFile


def trace_section(read: RunRead) -> list[str]:
    run = read.run
    t = TraceFile.load(run.path)
    if t is None:
        return []
    path = TraceFile.path_in(run.path)
    spec = t.spec
    reported, expected = t.reported_cached_tokens, t.expected_cached_tokens
    ratio = f" ({t.cached_share:.0%} of it)" if t.cached_share is not None else ""
    replayed = [r for r in read.records if r.check == "trace"]
    ok = [r for r in replayed if r.ok]
    return [
        "",
        "## Trace replay",
        "",
        f"`{spec.get('file')}` at {spec.get('time_scale')}x its times, {spec.get('block_tokens')}-token "
        f"blocks: {t.requests} requests ({t.failed} failed), {fmt(t.requests_per_s)} completed "
        f"req/s, {fmt(t.output_tokens_per_s, 1)} output tok/s.",
        f"- TTFT p50 / p90 / p99 {stats_text(t.ttft_s, [metrics.ttft_s(r) for r in ok])} s; TPOT "
        f"{stats_text(t.tpot_s, [metrics.tpot_s(r) for r in ok], 4)} s; client late p50 / p99 "
        f"{lateness_text(t.lateness_p50_s, t.lateness_p99_s, replayed)} s; lag growth "
        f"{fmt(t.lag_growth)} s/s. " + BOUNDS_NOTE,
        f"- Prefix cache: the trace's shared blocks imply {expected} cached tokens (an unbounded cache); the "
        f"server reported {reported_text(reported)}{ratio}. Of "
        f"{t.sharing_requests} requests whose leading blocks an earlier request had sent, "
        + (
            f"{t.sharing_served} were served 90% or more of them from the cache."
            if reported is not None
            else "how many were served from the cache is not reported."
        ),
        f"\nSource: `{relative(path)}`; each record's `labels.expected_cached_tokens` in "
        f"`{relative(run.requests_path)}`.",
    ]


def console_lines(run: RunDir) -> list[str]:
    t = TraceFile.load(run.path)
    if t is None:
        return []
    return [
        f"trace: {t.requests - t.failed}/{t.requests} ok, TTFT p99 "
        f"{bounded_text(t.ttft_s.p99, t.ttft_s.p99_ci)} s; "
        f"cached tokens in usage {reported_text(t.reported_cached_tokens)}, implied "
        f"{t.expected_cached_tokens}"
    ]
