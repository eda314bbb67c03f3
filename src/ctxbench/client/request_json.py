"""A request's JSON body, with each chat message encoded once.

A conversation's next request repeats every earlier message: at a 1M-token ramp turn the body is 5 MB, and
encoding it whole took 50-100 ms of the client's time between turns on 2 cores while the server waited.
`RequestJson` keeps the encoded bytes of the messages it has seen (by their content string, the same object
from turn to turn) and encodes only the new ones; the rest of the body is encoded as usual. The bytes are
what `json.dumps(body, ensure_ascii=False).encode()` gives, key order aside.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

# Encoded messages kept: a ramp's conversations and their turns (each keeps its content alive anyway).
KEPT = 256


class RequestJson:
    """Encodes bodies; one per client (a client's event loop is its only user)."""

    def __init__(self) -> None:
        self._messages: OrderedDict[tuple[int, str], tuple[str, bytes]] = OrderedDict()

    def encode(self, body: Mapping[str, Any]) -> bytes:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _dumps(body)
        rest = _dumps({key: value for key, value in body.items() if key != "messages"})
        parts = b",".join(self._message(m) for m in messages)
        return b'{"messages":[' + parts + b"]" + (b"," + rest[1:] if rest != b"{}" else b"}")

    def _message(self, message: Mapping[str, Any]) -> bytes:
        content, role = message.get("content"), message.get("role")
        if not isinstance(content, str) or not isinstance(role, str) or len(message) != 2:
            return _dumps(message)  # tool calls, parts, names: encoded each time
        key = (id(content), role)
        kept = self._messages.get(key)
        if kept is not None and kept[0] is content:
            self._messages.move_to_end(key)
            return kept[1]
        encoded = _dumps({"role": role, "content": content})
        self._messages[key] = (content, encoded)  # the content held: its id cannot be reused meanwhile
        if len(self._messages) > KEPT:
            self._messages.popitem(last=False)
        return encoded


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()
