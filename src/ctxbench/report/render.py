"""Reports rebuilt from files alone: a run's manifest and raw records in, Markdown out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import decode_stall, metrics
from ..records import RequestRecord
from ..results.ramp_table import RAMP_TABLE, run_rows
from ..results.store import RunDir
from ..telemetry import TELEMETRY_FILE, checks_in, read_telemetry, summarize, token_energy

COLUMNS = (
    "request", "phase", "status", "prompt tok", "cached tok", "output tok", "TTFT s", "decode tok/s", "E2E s",
    "answer",
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def request_row(record: RequestRecord, answer_chars: int = 60) -> tuple[str, ...]:
    """One table row of per-request metrics; token counts that are not from `usage` are marked `~`."""
    out = metrics.output_tokens(record)
    out_text = "n/a" if out is None else f"{out.tokens}" + ("" if out.source == "usage" else "~")
    status = "ok" if record.ok else f"failed: {record.error.kind}"  # type: ignore[union-attr]
    answer = record.text.strip()
    if len(answer) > answer_chars:
        answer = answer[:answer_chars] + "..."
    return (
        record.request_id,
        record.labels.get("phase", ""),
        status + (" (retried)" if record.retried else ""),
        str(metrics.prompt_tokens(record) or "n/a"),
        str(metrics.cached_tokens(record) if metrics.cached_tokens(record) is not None else "n/a"),
        out_text,
        _fmt(metrics.ttft_s(record)),
        _fmt(metrics.decode_rate(record), 1),
        _fmt(metrics.e2e_s(record)),
        answer,
    )


def markdown_table(rows: Sequence[Sequence[str]], columns: Sequence[str] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def run_report(run: RunDir, price_per_gpu_hour: float | None = None) -> str:
    """A run's report, from the files in its directory alone (manifest, records, check summaries)."""
    manifest = json.loads((run.path / "manifest.json").read_text())
    records = list(run.records())
    summary = metrics.summarize(records)
    engine = manifest.get("engine", {})
    lines = [
        f"# ctxbench run: {manifest.get('deployment', '?')}",
        "",
        f"- Run `{run.run_id}`; source of every number below: `{_relative(run.requests_path)}`.",
        f"- Engine: {engine.get('name', '?')} {engine.get('version', '')}; model `{manifest.get('model', '?')}`.",
        f"- Started {manifest.get('started_at', '?')}, ended {manifest.get('ended_at', 'not yet')}.",
    ]
    if engine.get("cold_start_s") is not None:
        lines.append(f"- Cold start (launch -> ready): {engine['cold_start_s']:.1f} s; {engine.get('replicas', 1)} "
                     f"replica(s); command: `{' '.join(engine.get('command') or [])}`.")
    if manifest.get("note"):
        lines.append(f"- Note: {manifest['note']}")
    if manifest.get("failed"):
        error = str(manifest["failed"].get("error", ""))
        lines += ["", f"**The deployment FAILED** ({manifest['failed'].get('at', '?')}): {error.splitlines()[0]}",
                  "", "```", *error.splitlines()[1:], "```"]
    lines += _counters_section(run) + _telemetry_section(run, records)
    lines += _capacity_section(run) + _needle_section(run) + _ramp_section(run, records)
    lines += _throughput_section(run, manifest, price_per_gpu_hour)
    lines += [
        "",
        "## Requests",
        "",
        f"{summary.requests} requests, {summary.failed} failed. "
        f"TTFT p50 {_fmt(summary.ttft_s.p50)} s; decode p50 {_fmt(summary.decode_rate.p50, 1)} tokens/s "
        f"(output tokens from {', '.join(sorted(summary.output_tokens_source)) or 'n/a'}).",
        "",
        markdown_table([request_row(r) for r in records]),
        "",
        "TTFT: send -> first chunk with generated text. Decode: (output tokens - 1) / (last - first token time). "
        "Formulas: docs/metrics.md. `~` marks a token count that did not come from the server's usage.",
        "",
    ]
    return "\n".join(lines)


def _telemetry_section(run: RunDir, records: Sequence[RequestRecord]) -> list[str]:
    telemetry = read_telemetry(run.path / TELEMETRY_FILE)
    if telemetry is None:
        return []
    lines = ["", "## GPU telemetry", ""]
    if not telemetry.available:
        return [*lines, f"Not sampled: {telemetry.reason or 'no GPU'}. The checks ran unchanged."]
    interval = telemetry.headers[-1].get("interval_s")
    lines += [f"Sampled through NVML every {interval} s on {', '.join(telemetry.gpu_names())} "
              f"(`{TELEMETRY_FILE}`); memory and power are totals over the deployment's GPUs at each instant; "
              "energy per token is the check's whole energy over each token count (docs/metrics.md).", "",
              "| check | duration s | samples | peak memory GiB | mean power W | energy kJ | J / output token "
              "| J / prefilled token | mean SM util % | max SM clock MHz |", "|" + "---|" * 10]
    for check in checks_in(telemetry.samples):
        figure = summarize(telemetry.samples, check)
        if figure is None:
            continue
        energy = token_energy(figure, [r for r in records if r.labels.get("check") == check])
        memory = None if figure.peak_memory_bytes is None else figure.peak_memory_bytes / 2**30
        kilojoules = None if figure.energy_j is None else figure.energy_j / 1000
        lines.append(
            f"| {check} | {figure.duration_s:.1f} | {figure.samples} | {_fmt(memory, 2)} | {_fmt(figure.mean_power_w, 0)} "
            f"| {_fmt(kilojoules, 2)}{'' if figure.energy_source == 'counter' else ' (power x time)'} "
            f"| {_fmt(energy.joules_per_output_token, 3)} | {_fmt(energy.joules_per_prefilled_token, 5)} "
            f"| {_fmt(figure.mean_sm_util_pct, 0)} | {figure.max_sm_clock_mhz or 'n/a'} |")
    return lines


COUNTER_NAMES = ("prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "preemptions",
                 "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens")


def counter_deltas(run: RunDir) -> dict[str, dict[str, float]]:
    """Per check: the engine's counters after - before (common names, summed over replicas), from
    `metrics.jsonl`; the latest attempt's snapshots win."""
    path = run.path / "metrics.jsonl"
    if not path.exists():
        return {}
    snapshots: dict[tuple[str, str], dict[str, float]] = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        total: dict[str, float] = {}
        for replica in entry.get("replicas", []):
            for name, value in replica.get("common", {}).items():
                total[name] = total.get(name, 0.0) + value
        snapshots[(entry["check"], entry["phase"])] = total
    deltas = {}
    for (check, phase), after in snapshots.items():
        before = snapshots.get((check, "before"))
        if phase == "after" and before is not None:
            deltas[check] = {n: after[n] - before[n] for n in COUNTER_NAMES if n in after and n in before}
    return deltas


def _counters_section(run: RunDir) -> list[str]:
    deltas = {check: d for check, d in counter_deltas(run).items() if check != "run" and d}
    if not deltas:
        return []
    names = [n for n in COUNTER_NAMES if any(n in d for d in deltas.values())]
    rows = [[check, *(f"{d[n]:.0f}" if n in d else "n/a" for n in names)] for check, d in deltas.items()]
    return ["", "## Engine counters per check (`/metrics`, after - before)", "",
            markdown_table(rows, ["check", *names]), "",
            "Common names over the engines' own (docs/metrics.md); n/a: this engine does not export it."]


def _throughput_section(run: RunDir, manifest: dict[str, Any], price_override: float | None) -> list[str]:
    path = run.path / "throughput.json"
    if not path.exists():
        return []
    from ..results.evidence import cost_per_million, price_of

    data = json.loads(path.read_text())
    spec = data.get("spec", {})
    gpus = int(manifest.get("gpus", 0))
    price = price_of(manifest, price_override)
    deltas = counter_deltas(run)
    slo = ", ".join(f"{name} <= {spec[key]} s" for name, key in (("TTFT", "ttft_slo_s"), ("TPOT", "tpot_slo_s"))
                    if spec.get(key) is not None) or "none set: every successful request counts"
    rows = []
    for users, level in sorted(data.get("levels", {}).items(), key=lambda item: int(item[0])):
        cost = cost_per_million(price, gpus, level["window_s"], level["output_tokens"])
        rate, per_step = metrics.spec_acceptance(deltas.get(f"throughput-u{users}", {}))
        rows.append([
            users, f"{level['requests']} ({level['failed']} failed)", _fmt(level["output_tokens_per_s"], 1),
            _fmt(level["requests_per_s"]), f"{level['goodput_requests']} ({_fmt(level['goodput_per_s'])}/s)",
            f"{_fmt(level['ttft_s']['p50'])} / {_fmt(level['ttft_s']['p99'])}",
            f"{_fmt(level['tpot_s']['p50'], 4)} / {_fmt(level['tpot_s']['p99'], 4)}",
            _fmt(level["decode_rate"]["p50"], 1), f"{_fmt(level['queue_s']['p50'], 4)} / {_fmt(level['queue_s']['p99'], 4)}",
            _fmt(level["tokens_per_chunk"]["mean"]),
            "n/a" if rate is None else f"{rate:.0%} ({_fmt(per_step)} a step)",
            "n/a" if cost is None else f"${cost:.2f}",
        ])
    columns = ["users", "requests", "output tok/s", "req/s", "goodput", "TTFT p50/p99 s", "TPOT p50/p99 s",
               "decode/user p50", "client queue p50/p99 s", "tokens/chunk", "draft acceptance", "$/M output"]
    return [
        "", "## Many users, short prompts", "",
        f"Closed loop: each user sends the next request when the previous ends; {spec.get('prompt_tokens')} tokens "
        f"in ({spec.get('source')}, shared prefix {spec.get('shared_prefix_tokens', 0)} tokens), "
        f"{spec.get('output_tokens')} out{' (ignore_eos)' if spec.get('ignore_eos') else ''}; each user's first "
        f"{spec.get('warmup_requests')} request(s) are warm-up, recorded and excluded. Goodput SLO: {slo}. "
        f"Source: `{_relative(path)}`, requests in `{_relative(run.requests_path)}`, acceptance from `/metrics` "
        f"(`metrics.jsonl`). Cost at ${price:.2f}/GPU-hour x {gpus} GPU(s)" + (" (n/a: a CPU run)." if not gpus else "."),
        "",
        markdown_table(rows, columns),
    ]


def _relative(path: Path) -> str:
    """`runs/<run_id>/<file>` or `<table>`: paths relative to the results directory, so a results
    directory can be moved (or committed) and its reports stay true."""
    parts = path.parts
    if "runs" in parts:
        index = len(parts) - 1 - parts[::-1].index("runs")
        return str(Path(*parts[index:]))
    return path.name


def _capacity_section(run: RunDir) -> list[str]:
    path = run.path / "capacity.json"
    if not path.exists():
        return []
    c = json.loads(path.read_text())
    verdict = "holds" if c["holds"] else "does NOT hold"
    return [
        "",
        f"## Claim 1, capacity: {verdict}",
        "",
        f"- Limit {c['limit_tokens']} tokens per request, read from {c['limit_source']}.",
        f"- Near the limit: {c['target_tokens']} planned tokens, "
        + (f"accepted; server counted {c['prompt_tokens']} (count error {c['count_error_tokens']:+d}); "
           f"prefill {_fmt(c['prefill_s'])} s, {_fmt(c['prefill_tokens_per_s'], 0)} tokens/s."
           if c["accepted"] else f"NOT accepted: {c['near_limit_error']}"),
        f"- Over the limit ({c['over_limit_tokens']} tokens): {c['over_limit_outcome']}",
        f"- Source: `{_relative(path)}`; requests {', '.join(c['request_ids'])} in `requests.jsonl`.",
    ]


def _needle_section(run: RunDir) -> list[str]:
    path = run.path / "needle.json"
    if not path.exists():
        return []
    needle = json.loads(path.read_text())
    trials = needle["trials"]
    recall = needle["recall_by_length"]
    lines = ["", "## Claim 2, retrieval in a fresh document", ""]
    lines += [f"- {length} tokens: found {r['found']}/{r['scored']}" for length, r in recall.items()]
    suspects = [t["request_id"] for t in trials if t["cache_hit_suspected"]]
    if suspects:
        lines.append(f"- PREFIX-CACHE HIT SUSPECTED on fresh prompts: {', '.join(suspects)}")
    lines += ["", markdown_table(
        [(str(t["length"]), f"{t['depth']:.2f}", str(t["prompt_tokens"] or "n/a"), str(t["cached_tokens"] or 0),
          _fmt(t["ttft_s"]),
          t["skipped"] and "skipped" or t["error"] and "failed" or ("yes" if t["found"] else "no"),
          str(t["expected"] or ""), (t["answer"] or t["skipped"] or t["error"] or "")[:60])
         for t in trials],
        ("length", "depth", "prompt tok", "cached tok", "TTFT s", "found", "expected", "answer"),
    )]
    lines.append(f"\nSource: `{_relative(run.path / 'niah.log')}` and `{_relative(path)}`.")
    return lines


def claims_summary(run: RunDir) -> list[str]:
    """One line per claim checked in this run, for a terminal."""
    lines = []
    capacity = run.path / "capacity.json"
    if capacity.exists():
        c = json.loads(capacity.read_text())
        lines.append(f"capacity: {'holds' if c['holds'] else 'does NOT hold'} at {c['target_tokens']} of "
                     f"{c['limit_tokens']} tokens; over the limit: {c['over_limit_outcome'][:80]}")
    needle = run.path / "needle.json"
    if needle.exists():
        recall = json.loads(needle.read_text())["recall_by_length"]
        lines.append("needle recall: " + ", ".join(f"{n} tokens {r['found']}/{r['scored']}" for n, r in recall.items()))
    records = list(run.records())
    rows = ramp_table_rows(run, records)
    for users in sorted({int(r["users"]) for r in rows}):
        mine = [r for r in rows if int(r["users"]) == users]
        scored = [r for r in mine if r["recall"]]
        ids = {r["request_id"] for r in mine}
        # the evidence table's figure (pooled over the setting), so the console and the report agree
        pooled = decode_stall.pooled_stall(decode_stall.user_stalls([r for r in records if r.request_id in ids]).values())
        lines.append(f"ramp, {users} user(s): recall {sum(int(r['recall']) for r in scored)}/{len(scored)}"
                     + (f", decode under another user's prefill {decode_stall.format_stall(pooled)}"
                        if users > 1 and pooled else ""))
    throughput = run.path / "throughput.json"
    if throughput.exists():
        levels = json.loads(throughput.read_text()).get("levels", {})
        lines.append("many users: " + ", ".join(
            f"{users} user(s) {_fmt(level['output_tokens_per_s'], 1)} output tok/s (TTFT p50 {_fmt(level['ttft_s']['p50'])} s)"
            for users, level in sorted(levels.items(), key=lambda item: int(item[0]))))
    return lines


def ramp_table_rows(run: RunDir, records: Sequence[RequestRecord] | None = None) -> list[dict[str, str]]:
    """This run's rows of the campaign's ramp table (`<results>/ramp1m.csv`), with rows rebuilt from its records
    for a users setting that was interrupted before its rows were written."""
    deployment = json.loads((run.path / "manifest.json").read_text()).get("deployment", "")
    return run_rows(run.path.parent.parent / RAMP_TABLE, run.run_id, list(run.records()) if records is None else records,
                    deployment=deployment, source_file=str(Path("runs") / run.run_id / run.requests_path.name))


def _number(text: str, digits: int) -> str:
    return "n/a" if not text else text if text == "inf" else f"{float(text):.{digits}f}"


def _ramp_section(run: RunDir, records: Sequence[RequestRecord]) -> list[str]:
    from .timeline import draw_timeline

    rows = ramp_table_rows(run, records)
    if not rows:
        return []
    table = run.path.parent.parent / RAMP_TABLE
    telemetry = read_telemetry(run.path / TELEMETRY_FILE)
    gpu = [s for s in telemetry.samples if s.check == "ramp"] if telemetry else []
    lines = ["", "## Claim 3, the conversation ramp", ""]
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
            f"- {users} user{'s' if users > 1 else ''}: recall {found}/{len(scored)}; last turn {last_turn} at "
            + ", ".join(f"{_number(r['context_tokens'], 0)} tokens (user {r['user']}: TTFT {_number(r['ttft_s'], 2)} s, "
                        f"decode {_number(r['decode_tokens_per_s'], 1)} tok/s)" for r in last)
            + (f"; decode while another user prefills: {decode_stall.format_stall(pooled)}" if users > 1 else "")
        )
        files = draw_timeline(setting, run.path / f"timeline-u{users}", f"{users} user(s): prefill and decode", gpu)
        if files:
            lines.append(f"  - timeline: ![timeline {users} users]({files[0].name}) ({files[1].name})")
    lines += ["", markdown_table(
        [(r["users"], r["user"], r["turn"], r["context_tokens"] or "n/a", r["new_prompt_tokens"] or "n/a",
          f"{r['cached_tokens'] or 'n/a'} ({r['intended_cached_tokens']})", _number(r["ttft_s"], 2),
          _number(r["decode_tokens_per_s"], 1), {"1": "yes", "0": "no"}.get(r["recall"], "n/a"),
          _number(r["stall_factor"], 1) if r["stall_factor"] else "-", r["error"][:40])
         for r in rows],
        ("users", "user", "turn", "context tok", "new tok", "cached (intended)", "TTFT s", "decode tok/s", "recall",
         "stall x", "error"),
    )]
    lines.append(f"\nSource: `{_relative(table)}` (rows with run_id `{run.run_id}`) and `{_relative(run.requests_path)}`. "
                 "Cached tokens beyond the intended history would be a leak; the history itself is reused on purpose.")
    return lines
