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


def run_report(run: RunDir) -> str:
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
    if manifest.get("note"):
        lines.append(f"- Note: {manifest['note']}")
    lines += _capacity_section(run) + _needle_section(run)
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


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


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
    return lines
