"""A run report's section per claim (capacity, needle, conversation ramp, many users), each from the check's
own files in the run directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..checks.recall_under_load import RecallUnderLoad
from ..measure import decode_stall, metrics
from ..measure.steady import steady_requests
from ..measure.telemetry import TELEMETRY_FILE, read_telemetry
from ..plan import cost_per_million
from ..records import RequestRecord
from ..render.run_read import RunRead
from ..render.tables import BOUNDS_NOTE, fmt, lateness_text, markdown_table, relative, stats_text
from ..results.cost import price_of
from ..store.check_files import Steady, ThroughputFile
from ..store.counters import counter_deltas
from ..store.ramp_table import RAMP_TABLE, run_rows
from ..store.run_dir import RunDir
from .endpoints_view import endpoints_lines, measured_records
from .slo_section import search_lines


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
    """Recall under load beside recall alone (`checks/recall_under_load.py`)."""
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
    labels = record.labels
    return labels.get("mode") == "open" and labels.get("rate") == rate and not labels.get("repeat")


def ramp_table_rows(run: RunDir, records: Sequence[RequestRecord] | None = None) -> list[dict[str, str]]:
    """This run's rows of the campaign's ramp table (`<results>/ramp1m.csv`), with rows rebuilt from its
    records for a users setting that was interrupted before its rows were written."""
    deployment = run.manifest().deployment or ""
    return run_rows(
        run.path.parent.parent / RAMP_TABLE,
        run.run_id,
        list(run.records()) if records is None else records,
        deployment=deployment,
        source_file=str(Path("runs") / run.run_id / run.requests_path.name),
    )


def _number(text: str, digits: int) -> str:
    return "n/a" if not text else text if text == "inf" else f"{float(text):.{digits}f}"


def _client_time(gaps: Sequence[float]) -> str:
    """The client's time between turns, where the server waited on it (metrics.between_turns_s)."""
    if not gaps:
        return ""
    return f"; client time between turns {min(gaps):.3f}-{max(gaps):.3f} s"


def ramp_section(read: RunRead) -> list[str]:
    run, records = read.run, read.records
    from .timeline import draw_timeline

    rows = ramp_table_rows(run, records)
    if not rows:
        return []
    table = run.path.parent.parent / RAMP_TABLE
    telemetry = read_telemetry(run.path / TELEMETRY_FILE)
    gpu = [s for s in telemetry.samples if s.check == "ramp"] if telemetry else []
    lines = ["", "## Claim 3, the conversation ramp", ""]
    task = (read.manifest.check_parameters.get("ramp") or {}).get("task", "single")
    if task != "single":
        lines.append(
            f'- Asked each turn: the {task} task\'s question (docs/campaigns.md, "Retrieval tasks").'
        )
    between = metrics.between_turns_s(records)
    for users in sorted({int(r["users"]) for r in rows}):
        mine = [r for r in rows if int(r["users"]) == users]
        scored = [r for r in mine if r["recall"]]
        found = sum(int(r["recall"]) for r in scored)
        ids = {r["request_id"] for r in mine}
        setting = [r for r in records if r.request_id in ids]
        pooled = decode_stall.pooled_stall(decode_stall.user_stalls(setting).values()) if users > 1 else None
        last_turn = max(int(r["turn"]) for r in mine)
        last = [r for r in mine if int(r["turn"]) == last_turn]
        lines.append(
            f"- {users} user{'s' if users > 1 else ''}: recall {found}/{len(scored)}; "
            f"last turn {last_turn} at "
            + ", ".join(
                f"{_number(r['context_tokens'], 0)} tokens (user {r['user']}: TTFT {_number(r['ttft_s'], 2)} "
                f"s, decode {_number(r['decode_tokens_per_s'], 1)} tok/s)"
                for r in last
            )
            + (
                f"; decode while another user prefills: {decode_stall.format_stall(pooled)}"
                if users > 1
                else ""
            )
            + _client_time([between[i] for i in ids if i in between])
        )
        files = draw_timeline(
            setting, run.path / f"timeline-u{users}", f"{users} user(s): prefill and decode", gpu
        )
        if files:
            lines.append(f"  - timeline: ![timeline {users} users]({files[0].name}) ({files[1].name})")
    lines += [
        "",
        markdown_table(
            [
                (
                    r["users"],
                    r["user"],
                    r["turn"],
                    r["context_tokens"] or "n/a",
                    r["new_prompt_tokens"] or "n/a",
                    f"{r['cached_tokens'] or 'not reported'} ({r['intended_cached_tokens']})",
                    _number(r["ttft_s"], 2),
                    _number(r["decode_tokens_per_s"], 1),
                    {"1": "yes", "0": "no"}.get(r["recall"], "n/a"),
                    decode_stall.format_factor(r["stall_factor"], r.get("stall_window", "")),
                    f"{between[r['request_id']]:.3f}" if r["request_id"] in between else "-",
                    r["error"][:40],
                )
                for r in rows
            ],
            (
                "users",
                "user",
                "turn",
                "context tok",
                "new tok",
                "cached (intended)",
                "TTFT s",
                "decode tok/s",
                "recall",
                "stall x",
                "client s",
                "error",
            ),
        ),
    ]
    lines.append(
        f"\nSource: `{relative(table)}` (rows with run_id `{run.run_id}`) and "
        f"`{relative(run.requests_path)}`. "
        "Intended: the previous turn's prompt and the reply the server generated (it holds both), reused on "
        "purpose; cached tokens beyond it would be a leak. Client s: from the previous turn's last byte to "
        "this turn's send, the client's time (building and counting the prompt, the body), while the server "
        "had nothing of this user's to do."
    )
    return lines
