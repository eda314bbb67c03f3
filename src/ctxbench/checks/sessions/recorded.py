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

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config.jsonl import json_values, read_lines
from ...config.param_types import MAX_TOKENS_PER_PROMPT, MAX_WAIT_S
from ...text.tokens import TokenCounter
from ..trace import TraceFileError, read_trace
from .agentic import check_conversation, check_grouping
from .params import SessionsParams


@dataclass(frozen=True)
class RecordedTurn:
    new_tokens: int  # the new text after everything before it (with its question and template)
    output_tokens: int
    at_s: float | None  # seconds from the trace's start (a first turn, or a turn given by timestamp)
    gap_s: float | None  # idle seconds after the previous reply ended
    prompt_tokens: int | None = None  # the whole prompt, where the trace gives it (Mooncake's input_length)
    where: str | None = None  # the trace's file:line, for an error that names it


@dataclass(frozen=True)
class RecordedSession:
    name: str
    shared_prefix: str | None
    shared_prefix_tokens: int
    turns: tuple[RecordedTurn, ...]


def read_session_trace(path: Path, max_sessions: int | None = None) -> list[RecordedSession]:
    """ctxbench's session-trace JSONL: sessions in the order of their first turn, turns by `turn`."""
    lines = read_lines(path, TraceFileError, "the session trace")
    rows: dict[str, list[tuple[int, dict[str, object], str]]] = {}
    seen: dict[tuple[str, int], str] = {}
    for _number, where, entry in json_values(path, lines, TraceFileError, "each line is one turn object"):
        if not isinstance(entry, dict) or "session" not in entry:
            raise TraceFileError(f'{where}: a line is a turn object with "session", "input_tokens", ...')
        session = str(entry["session"])
        turn = _whole(entry, "turn", where, 1, default=len(rows.get(session, [])) + 1)
        if (session, turn) in seen:
            raise TraceFileError(
                f"{where}: session {session!r} turn {turn} again (first at {seen[session, turn]})"
            )
        seen[session, turn] = where
        rows.setdefault(session, []).append((turn, entry, where))
    sessions = [_session(name, sorted(turns, key=lambda t: t[0])) for name, turns in rows.items()]
    if not sessions:
        raise TraceFileError(f"{path}: the session trace has no turns; one JSON object a line")
    sessions.sort(key=lambda s: s.turns[0].at_s or 0.0)
    return sessions[:max_sessions] if max_sessions else sessions


def _whole(
    entry: dict[str, object],
    key: str,
    where: str,
    minimum: int,
    default: int | None = None,
    maximum: int = MAX_TOKENS_PER_PROMPT,
) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise TraceFileError(f"{where}: {key} is {value!r}; give a whole number from {minimum} to {maximum}")
    return value


def _seconds(entry: dict[str, object], key: str, where: str, scale: float) -> float | None:
    """A time the line asks the replay to wait (`scale`: to seconds), at most `MAX_WAIT_S`."""
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value * scale <= MAX_WAIT_S:
        unit = "s" if scale == 1.0 else "ms"
        raise TraceFileError(
            f"{where}: {key} is {value!r}; give a number from 0 to {MAX_WAIT_S / scale:g} ({unit}: a replay "
            "waits at most a day for a line)"
        )
    return float(value) * scale


def _session(name: str, rows: list[tuple[int, dict[str, object], str]]) -> RecordedSession:
    turns: list[RecordedTurn] = []
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
        before = [t.at_s for t in turns if t.at_s is not None]
        if at is not None and before and at < max(before):
            raise TraceFileError(
                f"{where}: timestamp {at * 1000:g} ms is before an earlier turn of session {name!r} "
                f"({max(before) * 1000:g} ms); a session's turns run in order"
            )
        turns.append(
            RecordedTurn(
                new_tokens=_whole(entry, "input_tokens", where, 1),
                output_tokens=_whole(entry, "output_tokens", where, 1),
                at_s=at,
                gap_s=gap,
                where=where,
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
    for request in requests:
        if not request.hash_ids:  # sessions are found by them
            raise TraceFileError(
                f"{path}:{request.line}: no hash_ids; a Mooncake line lists its prompt's blocks"
            )
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
            turns.append(
                RecordedTurn(
                    new, request.output_length, at, None, request.input_length, f"{path}:{request.line}"
                )
            )
        prefix = f"mooncake-{'-'.join(map(str, head.hash_ids[:shared]))}" if shared else None
        sessions.append(RecordedSession(f"m{number}", prefix, shared * block_tokens, tuple(turns)))
    return sessions[:max_sessions] if max_sessions else sessions


# MLPerf Endpoints' agentic dataset, as mlcommons/endpoints reads it:
# src/inference_endpoint/dataset_manager/agentic_inference_dataset.py,
# commit 593295d688012eef24ddb90be34fd1c1de1a687e; the reply budget and the first turn's delay as at
# ea3327530376fef63d706f4105612e17c2c80a8d (with load_generator/agentic_inference_strategy.py, which delays a
# first turn from its conversation's start).
MLPERF_ROLES = ("user", "assistant", "tool")
MLPERF_DEFAULT_MAX_TOKENS = 128  # its default when a conversation names none
# the keys a conversation's first user row lends its later rows that lack them (those of upstream's
# _PROPAGATED_KEYS that set a budget)
MLPERF_PROPAGATED = ("max_new_tokens", "max_completion_tokens")


def sessions_of_mlperf_agentic(
    path: Path, counter: TokenCounter, stagger_s: float = 0.0, max_sessions: int | None = None
) -> list[RecordedSession]:
    """MLPerf Endpoints' agentic conversations (JSONL rows: conversation_id, turn, role user / assistant /
    tool, content, system, tool_calls, tool_results, delay_seconds, max tokens) as sessions, by their lengths
    and timings, not their text. A client row (user or tool) is a turn: its new text as long as its content
    (a tool row: its tool results' contents), counted with the deployment's tokenizer; its reply as long as
    the recorded assistant row after it (content and tool calls) within upstream's budget (the row's max
    tokens, else its conversation's first user row's, else 128), the budget where no reply is recorded; sent
    `delay_seconds` after the previous reply (MLPerf's tool and user time), a first turn that long after its
    conversation's start. A
    conversation's `system` text is its shared prefix (conversations with the same text share it). The
    conversations start `stagger_s` apart, in the file's order."""
    rows = read_mlperf_agentic(path)
    sessions = []
    for index, (name, turns) in enumerate(list(rows.items())[: max_sessions or None]):
        ordered = [entry for _, entry, _ in turns]
        system = next(
            (e["system"] for e in ordered if isinstance(e.get("system"), str) and e["system"]), None
        )
        first_user = next((e for e in ordered if e["role"] == "user"), {})
        defaults = {k: first_user[k] for k in MLPERF_PROPAGATED if first_user.get(k) is not None}
        recorded: list[RecordedTurn] = []
        for position, entry in enumerate(ordered):
            if entry["role"] == "assistant":
                continue
            reply = next((e for e in ordered[position + 1 :] if e["role"] == "assistant"), None)
            output = counter.count_many([_text(reply)])[0] if reply else 0
            new = max(1, counter.count_many([_text(entry)])[0])
            # upstream's request budget: the row's max tokens, else its conversation's first user row's, else
            # 128; the recorded reply is replayed at its length within that budget, never beyond it
            budget = _max_tokens({**defaults, **entry}) or MLPERF_DEFAULT_MAX_TOKENS
            output = min(output, budget) if output else budget
            delay = entry.get("delay_seconds")
            gap = float(delay) if isinstance(delay, int | float) and not isinstance(delay, bool) else 0.0
            gap = max(gap, 0.0)
            # a first turn's delay counts from its conversation's start, as upstream's scheduler applies it
            at, after = (index * stagger_s + gap, None) if not recorded else (None, gap)
            recorded.append(RecordedTurn(new, max(1, output), at, after))
        if not recorded:
            continue
        prefix = None if system is None else "mlperf-" + hashlib.sha256(system.encode()).hexdigest()[:12]
        tokens = counter.count_many([system])[0] if system else 0
        sessions.append(RecordedSession(name, prefix, max(tokens, 1) if prefix else 0, tuple(recorded)))
    return sessions


def read_mlperf_agentic(path: Path) -> dict[str, list[tuple[int, dict[str, Any], str]]]:
    """MLPerf Endpoints' agentic rows by conversation, in file order, each conversation's rows by turn, every
    row checked as upstream checks it (`agentic.py`); no token is counted (what the dry run reads)."""
    rows: dict[str, list[tuple[int, dict[str, Any], str]]] = {}
    order: list[tuple[str, str]] = []
    for _, entry, where in _json_lines(path):
        if entry.get("_type") == "dataset_metadata":
            continue
        conversation = entry.get("conversation_id")
        if (
            not isinstance(conversation, str | int)
            or isinstance(conversation, bool)
            or str(conversation) == ""
        ):
            raise TraceFileError(f"{where}: conversation_id is {conversation!r}; give a non-empty string")
        if entry.get("role") not in MLPERF_ROLES:
            raise TraceFileError(f"{where}: role is {entry.get('role')!r}; give user, assistant or tool")
        rows.setdefault(str(conversation), []).append((_whole(entry, "turn", where, 1), entry, where))
        delay = entry.get("delay_seconds")
        if isinstance(delay, int | float) and not isinstance(delay, bool) and delay > MAX_WAIT_S:
            raise TraceFileError(
                f"{where}: delay_seconds is {delay!r}; give at most {MAX_WAIT_S} "
                "(a replay waits a day at most)"
            )
        order.append((str(conversation), where))
    if not rows:
        raise TraceFileError(f"{path}: no conversation rows; one JSON object a line")
    check_grouping(order)  # what upstream refuses, refused here before anything starts (agentic.py)
    ordered = {name: sorted(turns, key=lambda t: t[0]) for name, turns in rows.items()}
    for name, turns in ordered.items():
        check_conversation(name, turns)
    return ordered


def check_fits(params: SessionsParams, slot: int, deployment: str) -> None:
    """Refuse, at its line, a recorded turn whose prompt and reply cannot fit a request's slot (the context a
    replay gives it: its session's shared prefix and every earlier turn and reply, then its own new text; a
    Mooncake line's own input_length). MLPerf agentic conversations are counted only once their tokenizer is
    loaded, so they are not checked here."""
    if params.trace is None or params.trace_format == "mlperf-agentic":
        return
    sessions = (
        sessions_of_mooncake(params.trace, params.block_tokens, params.max_sessions)
        if params.trace_format == "mooncake"
        else read_session_trace(params.trace, params.max_sessions)
    )
    for session in sessions:
        context = session.shared_prefix_tokens
        for number, turn in enumerate(session.turns, start=1):
            prompt = turn.prompt_tokens if turn.prompt_tokens is not None else context + turn.new_tokens
            if prompt + turn.output_tokens > slot:
                raise TraceFileError(
                    f"{turn.where or params.trace}: session {session.name!r} turn {number} needs about "
                    f"{prompt} prompt tokens and {turn.output_tokens} for its reply, more than the "
                    f"{slot}-token slot of {deployment}; a larger context per slot, or a trace that fits it"
                )
            context = prompt + turn.output_tokens


def describe_trace(params: SessionsParams) -> str | None:
    """What the check's trace holds, read and checked as its run reads it (a bad line raises here, before
    anything starts), for the dry run; None without a trace."""
    if params.trace is None:
        return None
    return trace_text(params.trace, params.trace_format, params.block_tokens, params.max_sessions)


def trace_text(path: Path, trace_format: str, block_tokens: int, max_sessions: int | None) -> str:
    """What a sessions trace holds: "3 session(s), 7 turn(s) (new text 100-300 tokens a turn, gaps 1-4 s)
    from x.jsonl"."""
    if trace_format == "mlperf-agentic":
        rows = read_mlperf_agentic(path)
        clients = sum(1 for rows_of in rows.values() for _, row, _ in rows_of if row["role"] != "assistant")
        return f"{len(rows)} conversation(s), {clients} client turn(s) from {path}"
    sessions = (
        sessions_of_mooncake(path, block_tokens, max_sessions)
        if trace_format == "mooncake"
        else read_session_trace(path, max_sessions)
    )
    turns = [turn for session in sessions for turn in session.turns]
    new = [turn.new_tokens for turn in turns]
    gaps = [turn.gap_s for turn in turns if turn.gap_s is not None]
    spread = f", gaps {min(gaps):g}-{max(gaps):g} s" if gaps else ""
    return (
        f"{len(sessions)} session(s), {len(turns)} turn(s) (new text {min(new)}-{max(new)} tokens a "
        f"turn{spread}) from {path}"
    )


def _text(entry: dict[str, Any]) -> str:
    """What a row says: its content, its tool calls (as JSON) or its tool results' contents."""
    parts = [entry["content"]] if isinstance(entry.get("content"), str) else []
    if isinstance(entry.get("tool_calls"), list):
        parts.append(json.dumps(entry["tool_calls"]))
    results = entry.get("tool_results")
    if isinstance(results, list):
        parts += [str(r.get("content", "")) for r in results if isinstance(r, dict)]
    return "\n".join(parts)


def _max_tokens(entry: dict[str, Any]) -> int | None:
    for key in ("max_new_tokens", "max_completion_tokens", "max_tokens"):
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any], str]]:
    lines = read_lines(path, TraceFileError, "the trace")
    for number, where, entry in json_values(path, lines, TraceFileError, "each line is one object"):
        if not isinstance(entry, dict):
            raise TraceFileError(f"{where}: a line is a JSON object")
        yield number, entry, where


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
