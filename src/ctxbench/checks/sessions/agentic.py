"""What MLPerf Endpoints refuses in an agentic conversations file, refused here too, each at its file:line
(mlcommons/endpoints `dataset_manager/agentic_inference_dataset.py` at
ea3327530376fef63d706f4105612e17c2c80a8d, `_validate_conversation_grouping`,
`_validate_conversation_structure`, `_validate_turn_numbering`):

- a `conversation_id` is printable ASCII, and a conversation's rows are consecutive in the file;
- by turn, the roles run user -> assistant -> (tool -> assistant)* ... -> user: a conversation opens with a
  user row, a user row follows an assistant row without tool calls or a tool row, a tool row follows an
  assistant row with tool calls;
- a user row has content; an assistant row has content or tool calls, and `tool_calls`, when present, is a
  non-empty list of `{"id": ..., "type": "function", "function": {"name": ..., "arguments": str or object}}`;
- a tool row has a non-empty `tool_results` list of `{"tool_call_id": ..., "content": ...}`;
- turns are 1, 2, ..., N.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..trace import TraceFileError

Row = tuple[int, dict[str, Any], str]  # (turn, row, "file:line")
_NEXT = {
    "start": ("user",),
    "user": ("assistant",),
    "assistant": ("tool", "user"),
    "tool": ("assistant", "user"),
}


def check_grouping(rows: Sequence[tuple[str, str]]) -> None:
    """(conversation id, where) in file order: each id printable ASCII, each conversation's rows together."""
    seen: set[str] = set()
    last = None
    for name, where in rows:
        if any(not 32 <= ord(char) <= 126 for char in name):
            raise TraceFileError(
                f"{where}: conversation_id {name!r} has a character that is not printable ASCII"
            )
        if name != last:
            if name in seen:
                raise TraceFileError(
                    f"{where}: the rows of conversation {name!r} are not together; MLPerf Endpoints needs "
                    "each conversation's rows consecutive in the file"
                )
            seen.add(name)
            last = name


def check_conversation(name: str, rows: Sequence[Row]) -> None:
    """One conversation's rows, sorted by turn, as upstream checks them (the module's rules)."""
    turns = [turn for turn, _, _ in rows]
    if turns != list(range(1, len(rows) + 1)):
        raise TraceFileError(
            f"{rows[0][2]}: conversation {name!r} has turns {turns}; number them 1, 2, ... with none missing"
        )
    state, called = "start", False
    for turn, row, where in rows:
        role = row["role"]
        if role not in _NEXT[state]:
            raise TraceFileError(f"{where}: turn {turn} is a {role} row after a {state} row; {_order(state)}")
        if role == "user":
            if not _text(row.get("content")):
                raise TraceFileError(f"{where}: a user row needs non-empty content")
            if called:
                raise TraceFileError(
                    f"{where}: a user row after tool calls; the tool row with their results first"
                )
        elif role == "tool":
            if state == "assistant" and not called:
                raise TraceFileError(f"{where}: a tool row follows an assistant row with no tool_calls")
            _check_results(row.get("tool_results"), where)
        else:
            calls = row.get("tool_calls")
            if calls is not None:
                _check_calls(calls, where)
            if not _text(row.get("content")) and not calls:
                raise TraceFileError(f"{where}: an assistant row needs non-empty content or tool_calls")
        called = role == "assistant" and bool(row.get("tool_calls"))
        state = role


def _order(state: str) -> str:
    follow = " or ".join(_NEXT[state])
    return (
        f"a conversation opens with a user row; after {state} comes {follow}"
        if state != "start"
        else ("a conversation opens with a user row")
    )


def _text(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _check_calls(calls: object, where: str) -> None:
    if not isinstance(calls, list) or not calls:
        raise TraceFileError(
            f"{where}: tool_calls is present but not a non-empty list; omit it or give the calls"
        )
    for index, call in enumerate(calls):
        place = f"{where}: tool_calls[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not _text(call.get("id")):
            raise TraceFileError(f"{place} needs a non-empty string id")
        if call.get("type") != "function":
            raise TraceFileError(f'{place}: type must be "function"')
        if not isinstance(function, dict) or not _text(function.get("name")):
            raise TraceFileError(f"{place}: function needs a non-empty name")
        if not isinstance(function.get("arguments"), str | dict):
            raise TraceFileError(f"{place}: function.arguments must be a JSON string or an object")


def _check_results(results: object, where: str) -> None:
    if not isinstance(results, list) or not results:
        raise TraceFileError(f"{where}: a tool row needs a non-empty tool_results list")
    for index, result in enumerate(results):
        place = f"{where}: tool_results[{index}]"
        if not isinstance(result, dict) or not _text(result.get("tool_call_id")):
            raise TraceFileError(f"{place} needs a non-empty string tool_call_id")
        if "content" not in result:
            raise TraceFileError(f"{place} needs a content field")
