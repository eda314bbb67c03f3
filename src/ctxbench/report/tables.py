"""What every Markdown report is made of: a request's row, a table, a number, a path relative to the results
directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .. import metrics
from ..records import RequestRecord

COLUMNS = (
    "request",
    "phase",
    "status",
    "prompt tok",
    "cached tok",
    "output tok",
    "TTFT s",
    "decode tok/s",
    "E2E s",
    "answer",
)


def fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def cell(text: str) -> str:
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
        fmt(metrics.ttft_s(record)),
        fmt(metrics.decode_rate(record), 1),
        fmt(metrics.e2e_s(record)),
        answer,
    )


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
