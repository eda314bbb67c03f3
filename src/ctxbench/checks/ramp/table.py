"""The campaign's conversation-ramp table, `<results>/ramp1m.csv`: one row per user and turn.

Columns are fixed here (docs/results-format.md documents them); rows are appended by the ramp as
each users setting ends, and read back by the evidence table and the reports. A setting that was
interrupted (a lost machine, a killed run) has records but no rows: `run_rows` rebuilds its rows from
the records' labels, so what was measured before the interruption is reported, not lost.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ...measure import decode_stall, metrics
from ...records import RequestRecord
from ...store.run_dir import attempt_of
from .labels import RampLabels, user_of

RAMP_TABLE = "ramp1m.csv"
RAMP_COLUMNS = (
    "deployment",
    "users",
    "user",
    "turn",
    "target_tokens",
    "context_tokens",
    "new_prompt_tokens",
    "cached_tokens",
    "intended_cached_tokens",
    "ttft_s",
    "decode_tokens_per_s",
    "output_tokens",
    "recall",
    "stall_rate_outside",
    "stall_rate_inside",
    "stall_factor",
    "stall_window",
    "error",
    "request_id",
    "run_id",
    "source_file",
)


class RampRow(BaseModel):
    """One row of the ramp table as written: each column its text, the table's own formatting read back
    unchanged (a report prints what the table holds), with the numbers the reports compare."""

    model_config = ConfigDict(frozen=True)

    deployment: str = ""
    users: str = ""
    user: str = ""
    turn: str = ""
    target_tokens: str = ""
    context_tokens: str = ""
    new_prompt_tokens: str = ""
    cached_tokens: str = ""
    intended_cached_tokens: str = ""
    ttft_s: str = ""
    decode_tokens_per_s: str = ""
    output_tokens: str = ""
    recall: str = ""  # "1" found, "0" missed, "" not scored
    stall_rate_outside: str = ""
    stall_rate_inside: str = ""
    stall_factor: str = ""
    stall_window: str = ""
    error: str = ""
    request_id: str = ""
    run_id: str = ""
    source_file: str = ""

    @classmethod
    def of(cls, columns: Mapping[str, str | None]) -> RampRow:
        """A row read from the CSV; a column an older table lacks is "" (as the table rewrites it)."""
        return cls(**{column: columns.get(column) or "" for column in RAMP_COLUMNS})

    @property
    def turn_number(self) -> int:
        return int(self.turn)

    @property
    def context(self) -> int:
        return int(self.context_tokens)

    @property
    def found(self) -> int | None:
        """1 or 0 where the turn's recall was scored."""
        return int(self.recall) if self.recall else None


def append_rows(table: Path, rows: Sequence[RampRow]) -> None:
    """Append rows, writing the header when the file is new, and flush. A table written before a column was
    added is rewritten first with today's header (its rows get "" in the new columns), so a resumed campaign
    never appends rows under a header they do not match."""
    table.parent.mkdir(parents=True, exist_ok=True)
    new = not table.exists() or table.stat().st_size == 0
    if not new:
        with table.open(newline="") as handle:
            reader = csv.DictReader(handle)
            old = list(reader)
            header = tuple(reader.fieldnames or ())
        if header != RAMP_COLUMNS:
            table.write_text("")
            append_rows(table, [RampRow.of(row) for row in old])
    with table.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=RAMP_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(row.model_dump() for row in rows)
        handle.flush()


def read_rows(table: Path, run_id: str | None = None) -> list[RampRow]:
    """Every row, or one run's rows (of each users setting's latest attempt); an absent table has none."""
    if not table.exists():
        return []
    with table.open(newline="") as handle:
        rows = [RampRow.of(row) for row in csv.DictReader(handle)]
    return rows if run_id is None else latest_attempt([row for row in rows if row.run_id == run_id])


def latest_attempt(rows: Sequence[RampRow]) -> list[RampRow]:
    """For each users setting, only the rows of its latest attempt (a forced rerun replaces, never adds)."""
    latest: dict[str, int] = {}
    for row in rows:
        latest[row.users] = max(latest.get(row.users, 0), attempt_of(row.request_id))
    return [row for row in rows if attempt_of(row.request_id) == latest[row.users]]


def _s(value: float | int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.4f}"
    return str(value)


def record_row(
    record: RequestRecord,
    *,
    deployment: str,
    run_id: str,
    source_file: str,
    stall: decode_stall.Stall | None = None,
    recall: bool | None = None,
    error: str | None = None,
) -> RampRow:
    """One ramp1m.csv row from a ramp record and its labels (users, user, turn, target and intended cached
    tokens, and the planted value where the record carries it)."""
    labels = RampLabels.of(record)
    prompt = metrics.prompt_tokens(record)
    cached = metrics.cached_tokens(record)
    out = metrics.output_tokens(record)
    asked = labels.question()
    if recall is None and record.ok and asked is not None:
        recall = asked.score(record.text)
    if error is None and record.error is not None:
        error = f"{record.error.kind}: {record.error.message}"
    return RampRow(
        deployment=deployment,
        users=_s(labels.users),
        user=_s(labels.user),
        turn=_s(labels.turn),
        target_tokens=_s(labels.target_tokens),
        context_tokens=_s(prompt),
        new_prompt_tokens=_s(None if prompt is None or cached is None else prompt - cached),
        cached_tokens=_s(cached),
        intended_cached_tokens=_s(labels.intended_cached_tokens),
        ttft_s=_s(metrics.ttft_s(record)),
        decode_tokens_per_s=_s(metrics.decode_rate(record)),
        output_tokens=_s(None if out is None else out.tokens),
        recall="" if recall is None else str(int(recall)),
        **_stall_cells(stall),
        error=error or "",
        request_id=record.request_id,
        run_id=run_id,
        source_file=source_file,
    )


def _stall_cells(stall: decode_stall.Stall | None) -> dict[str, str]:
    return {
        "stall_rate_outside": _s(stall.rate_outside if stall else None),
        "stall_rate_inside": _s(stall.rate_inside if stall else None),
        "stall_factor": _s(stall.factor if stall else None),
        "stall_window": stall.window if stall and stall.rate_inside is not None else "",
    }


def _setting_stalls(ramp: Sequence[RequestRecord]) -> dict[str, decode_stall.Stall | None]:
    """Each ramp record's stall against the other users of its users setting."""
    stalls: dict[str, decode_stall.Stall | None] = {}
    settings = {r.request_id: RampLabels.of(r).users for r in ramp}
    for users in set(settings.values()):
        stalls.update(decode_stall.user_stalls([r for r in ramp if settings[r.request_id] == users], user_of))
    return stalls


def rows_from_records(
    records: Iterable[RequestRecord], *, deployment: str, run_id: str, source_file: str
) -> list[RampRow]:
    """Rows for every ramp record (labels `check = ramp`), stall figures recomputed per users setting."""
    ramp = [r for r in records if r.check == "ramp"]
    stalls = _setting_stalls(ramp)
    return [
        record_row(
            r, deployment=deployment, run_id=run_id, source_file=source_file, stall=stalls.get(r.request_id)
        )
        for r in ramp
    ]


def run_rows(
    table: Path, run_id: str, records: Sequence[RequestRecord], *, deployment: str, source_file: str
) -> list[RampRow]:
    """A run's rows, rebuilt from its records (so a fix in metrics changes every figure of a row alike, and an
    interrupted setting has its measured turns). Runs older than the `needle_value` label cannot rebuild
    recall: their rows come from the table, plus rebuilt rows for any users setting it lacks, and their stall
    cells are recomputed from the records all the same (so the turns and the pooled figure use one window)."""
    ramp = [r for r in records if r.check == "ramp"]
    if ramp and all(RampLabels.of(r).needle_value is not None for r in ramp):
        return latest_attempt(
            rows_from_records(ramp, deployment=deployment, run_id=run_id, source_file=source_file)
        )
    stalls = _setting_stalls(ramp)
    rows = [
        row.model_copy(update=_stall_cells(stalls[row.request_id])) if row.request_id in stalls else row
        for row in read_rows(table, run_id)
    ]
    present = {row.users for row in rows}
    missing = [r for r in records if r.check == "ramp" and _s(RampLabels.of(r).users) not in present]
    if not missing:
        return rows
    # Attempts run one after another, so stalls over all of them equal stalls within each.
    return rows + latest_attempt(
        rows_from_records(missing, deployment=deployment, run_id=run_id, source_file=source_file)
    )
