"""Reports rebuilt from files alone: a run's manifest and raw records in, Markdown out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .. import metrics
from ..records import RequestRecord
from ..results.store import RunDir

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


def probe_report(run: RunDir) -> str:
    """The probe run's report, from `manifest.json` and `requests.jsonl` alone."""
    manifest = json.loads((run.path / "manifest.json").read_text())
    records = list(run.records())
    summary = metrics.summarize(records)
    engine = manifest.get("engine", {})
    lines = [
        f"# ctxbench probe: {manifest.get('deployment', '?')}",
        "",
        f"- Run `{run.run_id}`; source of every number below: `{_relative(run.requests_path)}`.",
        f"- Engine: {engine.get('name', '?')} {engine.get('version', '')}; model `{manifest.get('model', '?')}`.",
        f"- Started {manifest.get('started_at', '?')}, ended {manifest.get('ended_at', 'not yet')}.",
    ]
    if manifest.get("note"):
        lines.append(f"- Note: {manifest['note']}")
    lines += [
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


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
