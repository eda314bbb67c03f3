"""The campaign's conversation-ramp table, `<results>/ramp1m.csv`: one row per user and turn.

Columns are fixed here (docs/results-format.md documents them); rows are appended by the ramp as
each users setting ends, and read back by the evidence table and the reports.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

RAMP_TABLE = "ramp1m.csv"
RAMP_COLUMNS = (
    "deployment", "users", "user", "turn", "target_tokens", "context_tokens", "new_prompt_tokens", "cached_tokens",
    "intended_cached_tokens", "ttft_s", "decode_tokens_per_s", "output_tokens", "recall", "stall_rate_outside",
    "stall_rate_inside", "stall_factor", "error", "request_id", "run_id", "source_file",
)


def append_rows(table: Path, rows: Sequence[dict[str, str]]) -> None:
    """Append rows, writing the header when the file is new, and flush."""
    table.parent.mkdir(parents=True, exist_ok=True)
    new = not table.exists() or table.stat().st_size == 0
    with table.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=RAMP_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)
        handle.flush()


def read_rows(table: Path, run_id: str | None = None) -> list[dict[str, str]]:
    """Every row, or one run's rows (of each users setting's latest attempt); an absent table has none."""
    if not table.exists():
        return []
    with table.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return rows if run_id is None else latest_attempt([row for row in rows if row["run_id"] == run_id])


def attempt_of(request_id: str) -> int:
    """The attempt a request id belongs to: `...-a2` is attempt 2, anything else attempt 1."""
    head, sep, tail = request_id.rpartition("-a")
    return int(tail) if sep and tail.isdigit() else 1


def latest_attempt(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """For each users setting, only the rows of its latest attempt (a forced rerun replaces, never adds)."""
    latest: dict[str, int] = {}
    for row in rows:
        latest[row["users"]] = max(latest.get(row["users"], 0), attempt_of(row["request_id"]))
    return [row for row in rows if attempt_of(row["request_id"]) == latest[row["users"]]]
