"""Claim 3's run-report section (each users setting's turns: context, new and cached tokens, TTFT, decode,
recall, the stall under another user's prefill, the 2-user timeline) and its console lines, from the
campaign's ramp table and the run's records."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...measure import decode_stall
from ...measure.telemetry import TELEMETRY_FILE, read_telemetry
from ...records import RequestRecord
from ...render.run_read import RunRead
from ...render.tables import markdown_table, relative
from ...store.run_dir import RunDir, attempt_of
from .labels import RampLabels, user_of
from .table import RAMP_TABLE, RampRow, run_rows


def ramp_table_rows(run: RunDir, records: Sequence[RequestRecord] | None = None) -> list[RampRow]:
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


def between_turns_s(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Per ramp turn after the first, by request id: seconds from the previous turn's last byte to this turn's
    send, for the same user of the same users setting in the same attempt (one process's stamps). The
    server has nothing of this user's to do meanwhile: the time is the client's (building and counting the
    next prompt, the request body, the connection), and the GPU waits on it."""
    turns: dict[tuple[int | None, int | None, int], dict[int, RequestRecord]] = {}
    for record in records:
        if record.check != "ramp" or not (labels := RampLabels.of(record)).turn:
            continue
        key = (labels.users, labels.user, attempt_of(record.request_id))
        turns.setdefault(key, {})[labels.turn] = record
    gaps: dict[str, float] = {}
    for by_turn in turns.values():
        for number, record in by_turn.items():
            before = by_turn.get(number - 1)
            if before is not None and before.end_ns <= record.sent_ns:
                gaps[record.request_id] = (record.sent_ns - before.end_ns) / 1e9
    return gaps


def _number(text: str, digits: int) -> str:
    return "n/a" if not text else text if text == "inf" else f"{float(text):.{digits}f}"


def _client_time(gaps: Sequence[float]) -> str:
    """The client's time between turns, where the server waited on it (`between_turns_s`)."""
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
    between = between_turns_s(records)
    for users in sorted({int(r.users) for r in rows}):
        mine = [r for r in rows if int(r.users) == users]
        scored = [r for r in mine if r.recall]
        found = sum(int(r.recall) for r in scored)
        ids = {r.request_id for r in mine}
        setting = [r for r in records if r.request_id in ids]
        pooled = (
            decode_stall.pooled_stall(decode_stall.user_stalls(setting, user_of).values())
            if users > 1
            else None
        )
        last_turn = max(r.turn_number for r in mine)
        last = [r for r in mine if r.turn_number == last_turn]
        lines.append(
            f"- {users} user{'s' if users > 1 else ''}: recall {found}/{len(scored)}; "
            f"last turn {last_turn} at "
            + ", ".join(
                f"{_number(r.context_tokens, 0)} tokens (user {r.user}: TTFT {_number(r.ttft_s, 2)} "
                f"s, decode {_number(r.decode_tokens_per_s, 1)} tok/s)"
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
                    r.users,
                    r.user,
                    r.turn,
                    r.context_tokens or "n/a",
                    r.new_prompt_tokens or "n/a",
                    f"{r.cached_tokens or 'not reported'} ({r.intended_cached_tokens})",
                    _number(r.ttft_s, 2),
                    _number(r.decode_tokens_per_s, 1),
                    {"1": "yes", "0": "no"}.get(r.recall, "n/a"),
                    decode_stall.format_factor(r.stall_factor, r.stall_window),
                    f"{between[r.request_id]:.3f}" if r.request_id in between else "-",
                    r.error[:40],
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


def console_lines(run: RunDir) -> list[str]:
    lines: list[str] = []
    records = list(run.records())
    rows = ramp_table_rows(run, records)
    for users in sorted({int(r.users) for r in rows}):
        mine = [r for r in rows if int(r.users) == users]
        scored = [r for r in mine if r.recall]
        ids = {r.request_id for r in mine}
        # the evidence table's figure (pooled over the setting), so the console and the report agree
        pooled = decode_stall.pooled_stall(
            decode_stall.user_stalls([r for r in records if r.request_id in ids], user_of).values()
        )
        failed = [
            r.error
            for r in records
            if r.error is not None and r.check == "ramp" and RampLabels.of(r).users == users
        ]
        recall = (
            f"recall {sum(int(r.recall) for r in scored)}/{len(scored)}"
            if scored
            else f"recall not scored: {len(failed)} turn(s) failed (first: {failed[0].message[:80]})"
            if failed
            else "recall not scored"
        )
        lines.append(
            f"ramp, {users} user(s): {recall}"
            + (
                f", decode under another user's prefill {decode_stall.format_stall(pooled)}"
                if users > 1 and pooled
                else ""
            )
        )
    return lines
