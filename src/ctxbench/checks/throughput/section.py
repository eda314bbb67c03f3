"""The many-users check's run-report section (closed-loop levels with their steady state and the MLPerf
Endpoints view, open-loop rates, the SLO search, recall under load) and its console lines, from
`throughput.json` and the run's records."""

from __future__ import annotations

from collections.abc import Sequence

from ...measure import metrics
from ...measure.slo_search import search_text
from ...measure.steady import steady_requests
from ...plan import cost_per_million
from ...records import RequestRecord
from ...render.run_read import RunRead
from ...render.tables import (
    BOUNDS_NOTE,
    bounded_text,
    fmt,
    lateness_text,
    markdown_table,
    relative,
    stats_text,
)
from ...store.cost import price_of
from ...store.counters import counter_deltas
from ...store.run_dir import RunDir
from .endpoints import endpoints_lines, measured_records
from .file import Steady, ThroughputFile
from .labels import OPEN, ThroughputLabels
from .recall_under_load import RecallUnderLoad
from .search_section import search_lines


def throughput_section(read: RunRead) -> list[str]:
    run, manifest, price_override = read.run, read.manifest, read.price_per_gpu_hour
    data = ThroughputFile.load(run.path)
    if data is None:
        return []
    path = ThroughputFile.path_in(run.path)
    spec = data.spec
    gpus = manifest.gpus
    price = price_of(manifest, price_override)
    deltas = counter_deltas(run)
    slo = (
        ", ".join(
            f"{name} <= {spec[key]} s"
            for name, key in (("TTFT", "ttft_slo_s"), ("TPOT", "tpot_slo_s"))
            if spec.get(key) is not None
        )
        or "none set: every successful request counts"
    )
    rows = []
    for users, level in data.levels_sorted():
        measured = measured_records(level, users, read.records)
        ok = [r for r in measured if r.ok]
        cost = cost_per_million(price, gpus, level.window_s, level.output_tokens)
        rate, per_step = metrics.spec_acceptance(deltas.get(f"throughput-u{users}", {}))
        rows.append(
            [
                str(users),
                f"{level.requests} ({level.failed} failed)",
                fmt(level.output_tokens_per_s, 1),
                fmt(level.requests_per_s),
                f"{level.goodput_requests} ({fmt(level.goodput_per_s)}/s)",
                stats_text(level.ttft_s, [metrics.ttft_s(r) for r in ok]),
                stats_text(level.tpot_s, [metrics.tpot_s(r) for r in ok], 4),
                *_steady_cells(level.steady, measured),
                stats_text(level.decode_rate, [metrics.decode_rate(r) for r in ok], 1, (0.5,)),
                stats_text(level.queue_s, [metrics.queue_s(r) for r in measured], 4, (0.5, 0.99)),
                fmt(level.tokens_per_chunk.mean),
                "n/a" if rate is None else f"{rate:.0%} ({fmt(per_step)} a step)",
                "n/a" if cost is None else f"${cost:.2f}",
            ]
        )
    columns = [
        "users",
        "requests",
        "output tok/s",
        "req/s",
        "goodput",
        "TTFT p50 / p90 / p99 s",
        "TPOT p50 / p90 / p99 s",
        "steady output tok/s (cut)",
        "steady TTFT p50 / p90 / p99 s",
        "decode/user p50 tok/s",
        "client queue p50 / p99 s",
        "tokens/chunk",
        "draft acceptance",
        "$/M output",
    ]
    header = [
        "",
        "## Many users, short prompts",
        "",
        f"Source: `{relative(path)}`, requests in `{relative(run.requests_path)}`. Prompts of "
        f"{spec.get('prompt_tokens')} tokens ({spec.get('source')}, shared prefix "
        f"{spec.get('shared_prefix_tokens', 0)} tokens), {spec.get('output_tokens')} out"
        f"{' (ignore_eos)' if spec.get('ignore_eos') else ''}. Goodput SLO: {slo}. "
        f"Cost at ${price:.2f}/GPU-hour x {gpus} GPU(s)" + (" (n/a: a CPU run)." if not gpus else "."),
    ]
    closed = [
        "",
        "### Closed loop: users at a concurrency",
        "",
        f"Each user sends the next request when the previous ends; each user's first "
        f"{spec.get('warmup_requests')} request(s) are warm-up, recorded and excluded. Steady: the same "
        "level over the window where (nearly) all its users were in flight, ramp-up and drain cut "
        '(docs/metrics.md, "Steady state"); the other columns are the whole level\'s. '
        + BOUNDS_NOTE
        + " The SLO search judges a p99 limit by its upper end unless told otherwise. Draft acceptance from "
        "`/metrics` (`metrics.jsonl`).",
        "",
        markdown_table(rows, columns),
    ]
    return (
        header
        + (closed + endpoints_lines(data, read.records, run.path) if rows else [])
        + _open_loop_lines(data, price, gpus, read.records)
        + search_lines(data.model_dump(mode="json", exclude_unset=True))
        + _ask_lines(data)
    )


def _ask_lines(data: ThroughputFile) -> list[str]:
    """Recall under load beside recall alone (`recall_under_load.py`)."""
    asked = RecallUnderLoad.of(data)
    if asked is None:
        return []
    text = asked.text()
    return [
        "",
        "### Recall under load",
        "",
        f"- {text[0].upper()}{text[1:]}: one fresh document at a time, a fact planted at evenly "
        "spread depths, scored as the needle check scores it, with 95% Wilson intervals; "
        f"{asked.load_requests} load requests ({asked.load_failed} failed) ran beside the questions "
        "(`labels.ask` = alone, loaded or load).",
    ]


def _steady_cells(steady: Steady | None, measured: Sequence[RequestRecord]) -> list[str]:
    """The steady-state columns of a level (its TTFT over the requests sent inside its window, the rule of
    `steady.steady_requests`), "not computed" for levels recorded before it or without one."""
    if steady is None:
        return ["not computed", ""]
    return [
        f"{fmt(steady.output_tokens_per_s, 1)} ({fmt(steady.cut_s, 1)} s of "
        f"{fmt(steady.cut_s + steady.window_s, 1)} cut)",
        stats_text(steady.ttft_s, [metrics.ttft_s(r) for r in steady_requests(measured)]),
    ]


def _open_loop_lines(
    data: ThroughputFile, price: float, gpus: int, records: Sequence[RequestRecord]
) -> list[str]:
    if not data.rates:
        return ["", f"Open loop not offered: {data.rates_skipped}."] if data.rates_skipped else []
    spec = data.spec
    capacity = data.capacity_requests_per_s
    scaled = (
        f" The rates are {spec.get('rates_of_capacity')} x this run's closed-loop capacity, "
        f"{fmt(capacity)} req/s (its best level), so they mean the same load on any machine."
        if capacity
        else ""
    )
    rows = []
    for key, line in sorted(data.rates.items(), key=lambda item: float(item[0])):
        rate = float(key)
        if line.skipped is not None:
            rows.append([f"{rate:g}", line.skipped, *[""] * 9])
            continue
        measured = [r for r in records if _measured_at_rate(r, key)]
        ok = [r for r in measured if r.ok]
        cost = cost_per_million(price, gpus, line.window_s, line.output_tokens)
        verdict = "SATURATED" if line.saturated else "kept up"
        if line.client_behind:
            verdict += f"; CLIENT BEHIND (p99 late > {fmt(line.behind_threshold_s)} s)"
        rows.append(
            [
                f"{rate:g}",
                f"{line.requests} ({line.failed} failed)",
                fmt(line.realised_per_s),
                fmt(line.requests_per_s),
                fmt(line.output_tokens_per_s, 1),
                f"{line.goodput_requests} ({fmt(line.goodput_per_s)}/s)",
                stats_text(line.ttft_s, [metrics.ttft_s(r) for r in ok]),
                stats_text(line.tpot_s, [metrics.tpot_s(r) for r in ok], 4),
                lateness_text(line.lateness_p50_s, line.lateness_p99_s, measured),
                fmt(line.lag_growth),
                verdict + ("" if cost is None else f"; ${cost:.2f}/M output"),
            ]
        )
    columns = [
        "offered req/s",
        "requests",
        "schedule req/s",
        "completed req/s",
        "output tok/s",
        "goodput",
        "TTFT p50 / p90 / p99 s",
        "TPOT p50 / p90 / p99 s",
        "client late p50 / p99 s",
        "lag growth s/s",
        "verdict",
    ]
    return [
        "",
        "### Open loop: requests at a rate",
        "",
        f"{spec.get('arrival', 'poisson')} arrivals at each rate, lowest first, whatever the server does; a "
        f"rate is saturated when each request's lag behind its due time grows by more than "
        f"{spec.get('saturation_lag_growth')} s a second (docs/metrics.md), and the sweep stops there. "
        f"Client lateness is sent - due; TTFT and TPOT count from the send.{scaled}",
        "",
        markdown_table(rows, columns),
    ]


def _measured_at_rate(record: RequestRecord, rate: str) -> bool:
    """An open-loop rate's measured request (its key as `throughput.json` writes it), not a repeat's."""
    labels = ThroughputLabels.of(record)
    return (
        labels.mode == OPEN and labels.rate is not None and f"{labels.rate:g}" == rate and not labels.repeat
    )


def console_lines(run: RunDir) -> list[str]:
    lines: list[str] = []
    data = ThroughputFile.load(run.path) or ThroughputFile()
    if data.levels:
        lines.append(
            "many users: "
            + ", ".join(
                f"{users} user(s) {fmt(level.output_tokens_per_s, 1)} output tok/s (TTFT p50 "
                f"{bounded_text(level.ttft_s.p50, level.ttft_s.p50_ci)} s)"
                for users, level in data.levels_sorted()
            )
        )
    if data.rates_skipped:
        lines.append(f"open loop: not offered: {data.rates_skipped}")
    if data.rates:
        capacity_per_s = data.capacity_requests_per_s
        lines.append(
            "open loop"
            + (
                f" (rates scaled from the closed loop's {fmt(capacity_per_s)} req/s)"
                if capacity_per_s
                else ""
            )
            + ": "
            + ", ".join(
                f"{rate:g} req/s "
                + (
                    "not offered"
                    if line.skipped is not None
                    else ("SATURATED" if line.saturated else "kept up")
                    + (", CLIENT BEHIND" if line.client_behind else "")
                    + f" (TTFT p99 {bounded_text(line.ttft_s.p99, line.ttft_s.p99_ci)} s)"
                )
                for rate, line in data.rates_sorted()
            )
        )
    found = data.search
    if found:
        lines.append(
            "SLO search: "
            + (f"not searched: {found['skipped']}" if "skipped" in found else search_text(found))
        )
    asked = RecallUnderLoad.of(data)
    if asked is not None:
        lines.append(f"recall under load: {asked.text().removeprefix('recall ')}")
    return lines
