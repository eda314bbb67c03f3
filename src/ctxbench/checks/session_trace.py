"""Recorded agent sessions, for `[checks.sessions] trace`: ctxbench's session-trace JSONL, and the conversion
of a Mooncake trace (timestamp, input_length, output_length, hash_ids) into sessions.

A session trace has one turn a line (docs/campaigns.md, "Session traces"):

    {"session": "a", "turn": 1, "timestamp": 0, "input_tokens": 1200, "output_tokens": 64,
     "shared_prefix": "sys", "shared_prefix_tokens": 2048}
    {"session": "a", "turn": 2, "gap_s": 42.5, "input_tokens": 300, "output_tokens": 64}

`input_tokens` is the new text the turn adds after everything before it (the session's history, the server's
own replies included); `timestamp` (ms from the trace's start) or `gap_s` (idle seconds after the previous
reply ended) says when it is sent, a session's first turn by its timestamp; `shared_prefix` names a system
prompt the first turns of several sessions share, `shared_prefix_tokens` long.

A Mooncake trace names no sessions: a request whose hash ids begin with all of an earlier request's (its
prompt extends that one's prompt) continues that request's session, the longest such chain first; its new
text is what its input adds beyond the earlier prompt and reply, and its prompt is as long as its
`input_length` (its history, then fresh text); it is due at its own timestamp, or once the earlier reply
ended if that is later (Mooncake records arrivals, not reply ends). The leading hash ids a first turn
shares with an earlier session's first turn are its shared prefix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .trace import TraceFileError, read_trace


@dataclass(frozen=True)
class RecordedTurn:
    new_tokens: int  # the new text after everything before it (with its question and template)
    output_tokens: int
    at_s: float | None  # seconds from the trace's start (a first turn, or a turn given by timestamp)
    gap_s: float | None  # idle seconds after the previous reply ended
    prompt_tokens: int | None = None  # the whole prompt, where the trace gives it (Mooncake's input_length)


@dataclass(frozen=True)
class RecordedSession:
    name: str
    shared_prefix: str | None
    shared_prefix_tokens: int
    turns: tuple[RecordedTurn, ...]


def read_session_trace(path: Path, max_sessions: int | None = None) -> list[RecordedSession]:
    """ctxbench's session-trace JSONL: sessions in the order of their first turn, turns by `turn`."""
    try:
        lines = path.expanduser().read_text().splitlines()
    except OSError as exc:
        raise TraceFileError(
            f"{path}: cannot read the session trace ({exc.strerror}); give a local JSONL file"
        ) from None
    rows: dict[str, list[tuple[int, dict[str, object], str]]] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(text)
        except ValueError as exc:
            raise TraceFileError(f"{where}: not JSON ({exc}); each line is one turn object") from None
        if not isinstance(entry, dict) or "session" not in entry:
            raise TraceFileError(f'{where}: a line is a turn object with "session", "input_tokens", ...')
        turn = _whole(entry, "turn", where, 1, default=len(rows.get(str(entry["session"]), [])) + 1)
        rows.setdefault(str(entry["session"]), []).append((turn, entry, where))
    sessions = [_session(name, sorted(turns, key=lambda t: t[0])) for name, turns in rows.items()]
    if not sessions:
        raise TraceFileError(f"{path}: the session trace has no turns; one JSON object a line")
    sessions.sort(key=lambda s: s.turns[0].at_s or 0.0)
    return sessions[:max_sessions] if max_sessions else sessions


def _whole(entry: dict[str, object], key: str, where: str, minimum: int, default: int | None = None) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TraceFileError(f"{where}: {key} is {value!r}; give a whole number of at least {minimum}")
    return value


def _seconds(entry: dict[str, object], key: str, where: str, scale: float) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TraceFileError(f"{where}: {key} is {value!r}; give a number of at least 0")
    return float(value) * scale


def _session(name: str, rows: list[tuple[int, dict[str, object], str]]) -> RecordedSession:
    turns = []
    for index, (_, entry, where) in enumerate(rows):
        at = _seconds(entry, "timestamp", where, 1e-3)
        gap = _seconds(entry, "gap_s", where, 1.0)
        if index == 0 and at is None:
            raise TraceFileError(
                f"{where}: a session's first turn needs a timestamp (ms from the trace's start)"
            )
        if index > 0 and at is None and gap is None:
            raise TraceFileError(
                f"{where}: a later turn needs a timestamp or a gap_s after the previous reply"
            )
        turns.append(
            RecordedTurn(
                new_tokens=_whole(entry, "input_tokens", where, 1),
                output_tokens=_whole(entry, "output_tokens", where, 1),
                at_s=at,
                gap_s=gap,
            )
        )
    _, first, where = rows[0]
    prefix = first.get("shared_prefix")
    tokens = _whole(first, "shared_prefix_tokens", where, 1) if prefix is not None else 0
    return RecordedSession(name, None if prefix is None else str(prefix), tokens, tuple(turns))


def sessions_of_mooncake(
    path: Path, block_tokens: int, max_sessions: int | None = None, max_requests: int | None = None
) -> list[RecordedSession]:
    """A Mooncake trace as sessions (the module's docstring says how they are found)."""
    requests = read_trace(path, max_requests)
    chains: list[list[int]] = []  # request indexes per session
    last_of: dict[tuple[int, ...], int] = {}  # a session's latest hash ids -> the session
    for index, request in enumerate(requests):
        ids = tuple(request.hash_ids)
        parent = next(
            (last_of[ids[:cut]] for cut in range(len(ids), 0, -1) if ids[:cut] in last_of),
            None,
        )
        if parent is None:
            chains.append([index])
            session = len(chains) - 1
        else:
            session = parent
            del last_of[tuple(requests[chains[session][-1]].hash_ids)]
            chains[session].append(index)
        last_of[ids] = session
    firsts: list[tuple[int, ...]] = []
    sessions = []
    for number, chain in enumerate(chains):
        head = requests[chain[0]]
        shared = max((_common(tuple(head.hash_ids), other) for other in firsts), default=0)
        firsts.append(tuple(head.hash_ids))
        turns = []
        for position, index in enumerate(chain):
            request = requests[index]
            new = request.input_length
            if position > 0:
                before = requests[chain[position - 1]]
                new = max(1, request.input_length - before.input_length - before.output_length)
            at = request.timestamp_ms / 1000
            turns.append(RecordedTurn(new, request.output_length, at, None, request.input_length))
        prefix = f"mooncake-{'-'.join(map(str, head.hash_ids[:shared]))}" if shared else None
        sessions.append(RecordedSession(f"m{number}", prefix, shared * block_tokens, tuple(turns)))
    return sessions[:max_sessions] if max_sessions else sessions


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
