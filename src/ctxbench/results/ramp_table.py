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
    """Every row (or one run's rows); an absent table has none."""
    if not table.exists():
        return []
    with table.open(newline="") as handle:
        return [row for row in csv.DictReader(handle) if run_id is None or row["run_id"] == run_id]
