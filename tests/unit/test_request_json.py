"""Request bodies with each chat message encoded once (request_json.py): the same JSON as encoding the body
whole, a repeated message's bytes reused, and anything but a plain role+content message encoded each time."""

from __future__ import annotations

import json

from ctxbench.client.request_json import RequestJson


def test_a_body_decodes_to_what_was_given_and_a_repeated_message_is_encoded_once() -> None:
    encoder = RequestJson()
    history = [{"role": "user", "content": 'ünïcödé and "quotes"\n' * 1000}]
    first = {"model": "m", "messages": history, "stream": True, "max_tokens": 8}
    assert json.loads(encoder.encode(first)) == first
    reply = {"role": "assistant", "content": "Lisbon."}
    # the next turn copies the earlier messages (as the haystack builder does): same content strings
    second = {"model": "m", "messages": [dict(m) for m in history] + [reply], "temperature": 0.0}
    assert json.loads(encoder.encode(second)) == second
    kept = encoder._messages[(id(history[0]["content"]), "user")][1]
    assert encoder._message(dict(history[0])) is kept


def test_messages_with_more_than_a_role_and_a_text_are_encoded_each_time() -> None:
    encoder = RequestJson()
    parts = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    named = {"role": "user", "content": "hi", "name": "a"}
    body = {"messages": [parts, named]}
    assert json.loads(encoder.encode(body)) == body and not encoder._messages
    assert json.loads(encoder.encode({"model": "m", "prompt": "x"})) == {"model": "m", "prompt": "x"}
    assert json.loads(encoder.encode({"messages": [{"role": "user", "content": "a"}]})) == {
        "messages": [{"role": "user", "content": "a"}]
    }
