"""A run's report rebuilt from files alone: its manifest and raw records in, Markdown out."""

from __future__ import annotations

from collections.abc import Sequence

from ..checks.catalog import CHECKS
from ..measure import metrics
from ..measure.telemetry import TELEMETRY_FILE, checks_in, read_telemetry, summarize, token_energy
from ..records import RequestRecord, requests_line
from ..render.run_read import RunRead
from ..render.tables import fmt, markdown_table, percentile_text, relative, request_row, ttft_split_note
from ..store.run_dir import RunDir
from .agreement import agreement_section
from .counters import counters_section
from .glance import glance_section
from .sections import CHECK_SECTIONS


def _retried(records: Sequence[RequestRecord]) -> str:
    """Why the first request sent again on a new connection was (`requests_line` counts them), or nothing."""
    retried = [r for r in records if r.retried]
    return f" (first sent again: {retried[0].retry_reason or 'no reason recorded'})" if retried else ""


def _template_line(entry: dict[str, object] | None) -> str:
    if not entry:
        return "not recorded"
    if not entry.get("source"):
        return str(entry.get("note", "not reported"))
    sha = str(entry.get("sha256", ""))[:12]
    default = " (a default: the model has none)" if entry.get("fallback") else ""
    counter = entry.get("counter")
    counted = f" (counted with {entry['counted_with']})" if entry.get("counted_with") else ""
    return f"`{entry.get('file')}` from {entry['source']}, sha256 {sha}{default}; counter: {counter}{counted}"


def _given(value: object) -> str:
    """A manifest field as the report shows it: "?" where the run did not record it."""
    return "?" if value is None else str(value)


def run_report(run: RunDir, price_per_gpu_hour: float | None = None) -> str:
    """A run's report, from the files in its directory alone (manifest, records, check summaries)."""
    manifest = run.manifest()
    records = list(run.records())
    summary = metrics.summarize(records)
    engine = manifest.engine
    lines = [f"# ctxbench run: {_given(manifest.deployment)}", *glance_section(run, records)]
    lines += [
        "",
        "## The run",
        "",
        f"- Run `{run.run_id}`; source of every number below: `{relative(run.requests_path)}`.",
        f"- Engine: {_given(engine.name)} {engine.version if engine.version is not None else ''}; model "
        f"`{_given(manifest.model)}`.",
        f"- Started {_given(manifest.started_at)}, ended {manifest.ended_at or 'not yet'}.",
        f"- Token counts: {manifest.tokenizer or 'not recorded'}; chat template: "
        f"{_template_line(manifest.chat_template)}.",
    ]
    if engine.cold_start_s is not None:
        lines.append(
            f"- Cold start (launch -> ready): {engine.cold_start_s:.1f} s; {engine.replicas} "
            f"replica(s); command: `{' '.join(engine.command or [])}`."
        )
    if manifest.note:
        lines.append(f"- Note: {manifest.note}")
    if manifest.failed:
        error = manifest.failed.error
        lines += [
            "",
            f"**The deployment FAILED** ({_given(manifest.failed.at)}): {error.splitlines()[0]}",
            "",
            "```",
            *error.splitlines()[1:],
            "```",
        ]
    lines += counters_section(run) + agreement_section(run, records) + _telemetry_section(run, records)
    read = RunRead(run, records, manifest, price_per_gpu_hour)
    for check in CHECKS:
        lines += CHECK_SECTIONS[check.name](read)
    lines += [
        "",
        "## Requests",
        "",
        f"{requests_line(records)}{_retried(records)}. "
        f"TTFT p50 {percentile_text([metrics.ttft_s(r) for r in records if r.ok], 0.5)} s; decode p50 "
        f"{percentile_text([metrics.decode_rate(r) for r in records if r.ok], 0.5, 1)} tokens/s "
        f"(output tokens from {', '.join(sorted(summary.output_tokens_source)) or 'n/a'}).",
        "",
        markdown_table([request_row(r) for r in records]),
        *ttft_split_note(records),
        *_implausible_lines(records),
        "",
        "TTFT: send -> first token event (empty text included). "
        "Decode: (output tokens - 1) / (last - first token time). "
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
    lines += [
        f"Sampled through NVML every {interval} s on {', '.join(telemetry.gpu_names())} "
        f"(`{TELEMETRY_FILE}`); memory and power are totals over the deployment's GPUs at each instant; "
        "energy per token is the check's whole energy over each token count (docs/metrics.md).",
        "",
        "| check | duration s | samples | peak memory GiB | mean power W | energy kJ | J / output token "
        "| J / prefilled token | mean SM util % | max SM clock MHz |",
        "|" + "---|" * 10,
    ]
    for check in checks_in(telemetry.samples):
        figure = summarize(telemetry.samples, check)
        if figure is None:
            continue
        energy = token_energy(figure, [r for r in records if r.check == check])
        memory = None if figure.peak_memory_bytes is None else figure.peak_memory_bytes / 2**30
        kilojoules = None if figure.energy_j is None else figure.energy_j / 1000
        lines.append(
            f"| {check} | {figure.duration_s:.1f} | {figure.samples} | {fmt(memory, 2)} | "
            f"{fmt(figure.mean_power_w, 0)} "
            f"| {fmt(kilojoules, 2)}{'' if figure.energy_source == 'counter' else ' (power x time)'} "
            f"| {fmt(energy.joules_per_output_token, 3)} | {fmt(energy.joules_per_prefilled_token, 5)} "
            f"| {fmt(figure.mean_sm_util_pct, 0)} | {figure.max_sm_clock_mhz or 'n/a'} |"
        )
    return lines


def claims_summary(run: RunDir) -> list[str]:
    """One line per claim checked in this run, for a terminal, in the catalog's order: each check says its
    own (`Check.console`)."""
    lines = []
    died = run.died_during()
    if died:  # the engine's death, not the check's verdict: the check's result file says nothing
        lines.append(f"{died}: not concluded, the engine died during it (the verdict says how)")
    for check in CHECKS:
        lines += check.console(run)
    return lines


def _implausible_lines(records: Sequence[RequestRecord]) -> list[str]:
    """The records whose timing cannot be true (`metrics.implausible`): left out of every table, said here."""
    flagged = [(r.request_id, reason) for r in records if (reason := metrics.implausible(r)) is not None]
    if not flagged:
        return []
    return [
        "",
        f"{len(flagged)} record(s) left out of every timing figure, because their timing cannot be true "
        '(docs/metrics.md, "Records that cannot be true"):',
        *(f"- `{request_id}`: {reason}" for request_id, reason in flagged),
    ]
