"""What every Markdown report is made of: a request's row, a table, a number, a path relative to the results
directory."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from ..measure import metrics
from ..measure.arrivals import lateness_s
from ..measure.stats import percentile, quantile_bounds, samples_for_upper
from ..records import RequestRecord
from ..store.check_files import Stats
from ..store.counters import reported_text

COLUMNS = (
    "request",
    "phase",
    "status",
    "prompt tok",
    "cached tok",
    "output tok",
    "TTFT s",
    "engine prefill s",
    "rest of TTFT s",
    "decode tok/s",
    "E2E s",
    "answer",
)


def fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


# The rest of a TTFT worth a note: under half a second it is a human's blink, whatever the prefill.
NOTED_REST_S = 0.5


def ttft_split_note(records: Sequence[RequestRecord]) -> list[str]:
    """A note under the requests table where a request's TTFT held more outside the engine's prefill than in
    it (the engine's prompt time against the rest, at least `NOTED_REST_S`), naming the worst."""
    split = [
        (rest, prompt, r)
        for r in records
        if (rest := metrics.ttft_outside_prefill_s(r)) is not None
        and (prompt := metrics.engine_prompt_s(r)) is not None
        and rest > prompt
        and rest >= NOTED_REST_S
    ]
    if not split:
        return []
    rest, prompt, worst = max(split, key=lambda item: item[0])
    return [
        "",
        f"{len(split)} request(s) spent longer outside the engine's prefill than in it, half a second or "
        "more (the rest of TTFT: "
        "sending and reading the body, tokenizing, queueing, saving an idle slot's prompt): the most, "
        f"{worst.request_id}, TTFT {fmt(metrics.ttft_s(worst), 2)} s of which the engine's prefill "
        f"{fmt(prompt, 2)} s. At long contexts that is the difference between a cache that works and TTFT "
        'that is still many times the prefill (docs/metrics.md, "TTFT, decomposed").',
    ]


def cell(text: str) -> str:
    """One table cell: its pipes escaped, and every character that ends a line (a model's answer may hold \\r,
    \\x1c or \\u2028, not only \\n) a space, so that a row stays one line."""
    return " ".join(text.replace("|", "\\|").splitlines())


def request_row(record: RequestRecord, answer_chars: int = 60) -> tuple[str, ...]:
    """One table row of per-request metrics; token counts that are not from `usage` are marked `~`."""
    out = metrics.output_tokens(record)
    out_text = "n/a" if out is None else f"{out.tokens}" + ("" if out.source == "usage" else "~")
    status = "ok" if record.error is None else f"failed: {record.error.kind}"
    answer = record.text.strip()
    if len(answer) > answer_chars:
        answer = answer[:answer_chars] + "..."
    return (
        record.request_id,
        record.phase,
        status + (" (retried)" if record.retried else ""),
        str(metrics.prompt_tokens(record) or "n/a"),
        str(metrics.cached_tokens(record) if metrics.cached_tokens(record) is not None else "n/a"),
        out_text,
        fmt(metrics.ttft_s(record)),
        reported_text(metrics.engine_prompt_s(record), 3),
        reported_text(metrics.ttft_outside_prefill_s(record), 3),
        fmt(metrics.decode_rate(record), 1),
        fmt(metrics.e2e_s(record)),
        answer,
    )


def request_lines(record: RequestRecord, width: int = 80) -> list[str]:
    """A request as the console shows it, whole at `width` columns: its figures on a line (wrapped at words
    where they do not fit), then its answer on one line, shortened at a word with "..." (the run report's
    table has every column and more of the answer)."""
    row = dict(zip(COLUMNS, request_row(record), strict=True))
    figures = (
        f"{row['request']}: {row['status']}, {row['prompt tok']} in ({row['cached tok']} cached), "
        f"{row['output tok']} out, TTFT {row['TTFT s']} s, {row['decode tok/s']} tok/s, E2E {row['E2E s']} s"
        if record.ok
        else f"{row['request']}: {row['status']} after {row['E2E s']} s"
    )
    lines = textwrap.wrap(figures, width, subsequent_indent="    ", break_on_hyphens=False)
    answer = " ".join(record.text.split())
    said = f'"{answer}"' if answer else (record.error.message if record.error is not None else "")
    if said:
        lines.append("  " + textwrap.shorten(said, width - 2, placeholder=' ..."' if answer else " ..."))
    return lines


def markdown_table(rows: Sequence[Sequence[str]], columns: Sequence[str] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def relative(path: Path) -> str:
    """`runs/<run_id>/<file>` or `<table>`: paths relative to the results directory, so a results
    directory can be moved (or committed) and its reports stay true."""
    parts = path.parts
    if "runs" in parts:
        index = len(parts) - 1 - parts[::-1].index("runs")
        return str(Path(*parts[index:]))
    return path.name


# The percentiles every latency column gives, each with its 95% interval (`percentiles_text`).
QUANTILES = (0.5, 0.9, 0.99)
BOUNDS_NOTE = (
    "Each percentile is followed by its 95% distribution-free interval [low, high] (order statistics, "
    '`stats.quantile_bounds`); "too few" marks an end the requests cannot give: an upper end needs '
    + ", ".join(f"{samples_for_upper(q)} for p{round(q * 100)}" for q in QUANTILES)
    + " (a p99 of 9 requests has none)."
)


def percentile_text(values: Sequence[float | None], q: float, digits: int = 3) -> str:
    """One percentile (0 < q < 1) with its 95% interval: "0.412 [0.398, 0.431]", "1.830 [1.200, too few]"
    where the values reach no upper end, "n/a" without values."""
    present = [v for v in values if v is not None]
    bounds = quantile_bounds(present, q) if present else None
    return bounded_text(percentile(present, q * 100), bounds, digits)


def bounded_text(value: float | None, bounds: Sequence[float | None] | None, digits: int = 3) -> str:
    """A percentile and its 95% interval as `percentile_text` writes them; without `bounds` (a figure
    recorded before they were) the value alone."""
    if value is None:
        return "n/a"
    if bounds is None:
        return fmt(value, digits)
    low, high = bounds
    if low is None and high is None:
        return f"{fmt(value, digits)} [too few]"
    # an interval recorded before `quantile_bounds` held its estimate (2026-12-08) is shown widened to it
    low = None if low is None else min(low, value)
    high = None if high is None else max(high, value)
    ends = ["too few" if end is None else fmt(end, digits) for end in (low, high)]
    return f"{fmt(value, digits)} [{ends[0]}, {ends[1]}]"


def recorded_text(
    value: float | None,
    q: float,
    bounds: Sequence[float | None] | None,
    values: Sequence[float | None],
    digits: int = 3,
) -> str:
    """A recorded percentile (never recomputed: check_files) with its recorded 95% interval, or, for a
    figure recorded before intervals were, the interval of `values` (the requests it was measured over)."""
    if bounds is None:
        present = [v for v in values if v is not None]
        bounds = quantile_bounds(present, q) if present else None
    return bounded_text(value, bounds, digits)


def stats_text(
    stats: Stats, values: Sequence[float | None], digits: int = 3, quantiles: Sequence[float] = QUANTILES
) -> str:
    """p50 / p90 / p99 of a recorded figure, each with its 95% interval (`recorded_text`)."""
    names = [(q, f"p{round(q * 100)}") for q in quantiles]
    return " / ".join(
        recorded_text(getattr(stats, name), q, getattr(stats, f"{name}_ci"), values, digits)
        for q, name in names
    )


def p99_bound_text(stats: Stats) -> str:
    """The p99's 95% upper end beside it: ", <= 0.41 at 95%", ", too few to bound (6 of 368)", or "" for a
    figure recorded before bounds were."""
    if stats.p99_ci is None or stats.p99 is None:
        return ""
    high = stats.p99_ci[1]
    return (
        f", too few to bound ({stats.n} of {samples_for_upper(0.99)})"
        if high is None
        else f", <= {high:.2f} at 95%"
    )


def lateness_text(p50: float | None, p99: float | None, records: Sequence[RequestRecord]) -> str:
    """The client's recorded lateness p50 / p99 (sent - due), each with its 95% interval over the records."""
    late = [lateness_s(r) for r in records]
    return f"{recorded_text(p50, 0.5, None, late, 4)} / {recorded_text(p99, 0.99, None, late, 4)}"
