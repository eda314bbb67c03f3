"""Protocol edge cases through an in-process fake transport (httpx.MockTransport).

The same behaviours are also exercised against the real llama-server in tests/integration.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from ctxbench.client.stream import Client
from ctxbench.errors import ContextLimitExceeded, RequestFailed

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def sse(*events: object, done: bool = True) -> bytes:
    lines = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


def delta(text: str, finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


USAGE = {
    "choices": [],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 5}},
}


def client_for(handler: Handler) -> Client:
    # an async handler, as httpx's MockTransport accepts for an async client (its stub names a Coroutine)
    return Client("http://fake", "m", transport_factory=lambda: httpx.MockTransport(handler))  # type: ignore[arg-type]


async def chunked(*parts: bytes, then: Exception | None = None) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
        await asyncio.sleep(0)
    if then is not None:
        raise then


async def test_stream_is_recorded_with_usage_cached_tokens_and_finish_reason() -> None:
    seen: list[dict[str, object]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=chunked(sse(delta("Pa"), delta("ris"), delta(".", "stop"), USAGE)))

    async with client_for(handler) as client:
        record = await client.chat(
            [{"role": "user", "content": "capital?"}], max_tokens=8, labels={"user": "0"}
        )
    assert record.ok and record.text == "Paris." and record.finish_reason == "stop"
    assert record.usage is not None and (record.usage.prompt_tokens, record.usage.cached_tokens) == (7, 5)
    assert seen[0]["stream"] is True and seen[0]["stream_options"] == {"include_usage": True}
    assert seen[0]["max_tokens"] == 8 and record.labels == {"user": "0"}
    assert (
        record.enqueued_ns
        <= record.sent_ns
        <= record.first_byte_ns
        <= record.chunks[0].arrived_ns
        <= record.end_ns
    )


def vllm_event(content: str, finish: str | None = None, role: bool = False) -> dict[str, object]:
    delta: dict[str, object] = {"content": content}
    if role:
        delta = {"role": "assistant", "content": ""}
    return {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}


async def test_every_token_event_counts_empty_text_included_as_vllm_streams_them() -> None:
    # vLLM: a role announcement, then one event per token; two tokens decode to no visible text yet
    events = [
        vllm_event("", role=True),
        vllm_event(""),
        vllm_event("\u00e9"),
        vllm_event(""),
        vllm_event("t", "length"),
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
    ]

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chunked(*(sse(e, done=False) for e in events), sse(done=True)))

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}], max_tokens=4)
    assert record.ok and record.text == "\u00e9t"
    assert [c.text for c in record.chunks] == ["", "\u00e9", "", "t"]  # the role announcement is no token
    assert record.usage is not None and record.usage.completion_tokens == len(record.chunks)


async def test_llamacpp_role_and_closing_events_are_not_tokens_but_tool_calls_are() -> None:
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": ""}, "finish_reason": None}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]},
                    "finish_reason": None,
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=sse(*events))

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert [(c.text, c.reasoning, c.tool_call) for c in record.chunks] == [
        ("a", "", ""),
        ("", "", ""),
        ("", "", "f{}"),
    ]
    assert record.finish_reason == "stop" and record.text == "a"


async def test_an_empty_finish_event_is_a_token_unless_the_servers_count_says_it_closes() -> None:
    # llama.cpp completions: 2 tokens, then a closing event with empty text, the finish reason and usage;
    # vLLM: the last of 2 tokens is empty and carries the finish reason, usage comes apart
    llamacpp = [
        {"choices": [{"text": "a"}]},
        {"choices": [{"text": ""}]},
        {"choices": [{"text": "", "finish_reason": "length"}], "usage": {"completion_tokens": 2}},
    ]
    vllm = [
        {"choices": [{"text": "a"}]},
        {"choices": [{"text": "", "finish_reason": "length"}]},
        {"choices": [], "usage": {"completion_tokens": 2}},
    ]
    for events, texts in ((llamacpp, ["a", ""]), (vllm, ["a", ""])):

        async def handler(request: httpx.Request, events: list[object] = events) -> httpx.Response:
            return httpx.Response(200, content=sse(*events))

        async with client_for(handler) as client:
            record = await client.complete("prompt", max_tokens=2)
        assert [c.text for c in record.chunks] == texts
        assert record.usage is not None and record.usage.completion_tokens == len(record.chunks)


async def test_text_completions_read_choice_text() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        events = [{"choices": [{"text": "a"}]}, {"choices": [{"text": "b", "finish_reason": "length"}]}]
        return httpx.Response(200, content=sse(*events))

    async with client_for(handler) as client:
        record = await client.complete("prompt", max_tokens=2)
    assert record.text == "ab" and record.endpoint == "completions"


@pytest.mark.parametrize(
    ("body", "limit", "prompt"),
    [
        (
            {
                "error": {
                    "code": 400,
                    "type": "exceed_context_size_error",
                    "n_ctx": 4096,
                    "n_prompt_tokens": 5000,
                    "message": "request (5000 tokens) exceeds the available context size (4096 tokens)",
                }
            },
            4096,
            5000,
        ),
        (
            {
                "object": "error",
                "type": "BadRequestError",
                "message": "This model's maximum context length is 8192 "
                "tokens. However, you requested 9000 tokens (8900 in the messages, 100 in the completion).",
            },
            8192,
            9000,
        ),
        (
            {
                "error": {
                    "message": "The input (70000 tokens) is longer than the model's context length "
                    "(65536 tokens)."
                }
            },
            65536,
            70000,
        ),
    ],
    ids=["llama.cpp", "vllm", "sglang"],
)
async def test_over_limit_rejections_become_context_limit_with_the_limit(
    body: dict[str, object], limit: int, prompt: int
) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json=body)

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "long"}])
    assert record.error is not None and record.error.kind == "context_limit"
    assert (record.error.context_limit, record.error.server_prompt_tokens) == (limit, prompt)
    with pytest.raises(ContextLimitExceeded):
        record.raise_for_error()


async def test_other_http_errors_are_recorded_not_raised() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="Loading model")

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert record.error is not None and record.error.kind == "http_status" and "503" in record.error.message
    with pytest.raises(RequestFailed):
        record.raise_for_error()


async def test_disconnect_mid_stream_keeps_partial_output_and_is_not_retried() -> None:
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(
            200,
            content=chunked(
                sse(delta("half"), done=False), then=httpx.RemoteProtocolError("peer closed connection")
            ),
        )

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert calls == 1 and not record.retried
    assert record.text == "half"
    assert record.error is not None and record.error.kind == "disconnected"


async def test_failure_before_any_byte_on_a_reused_connection_is_retried_once() -> None:
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:  # no connect event was traced: the pool handed out an old connection
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, content=sse(delta("ok", "stop")))

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert calls == 2 and record.ok and record.retried
    assert record.retry_reason is not None and "Server disconnected" in record.retry_reason


async def test_failure_on_a_fresh_connection_is_not_retried() -> None:
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        await request.extensions["trace"]("connection.connect_tcp.complete", {})
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert calls == 1 and not record.retried and record.error is not None


async def test_a_retry_that_fails_again_is_recorded_as_failed_and_retried() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert record.retried and record.error is not None and record.error.kind == "disconnected"


async def test_malformed_lines_are_recorded_and_the_stream_goes_on() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=sse(delta("a"), "{not json", "[1, 2]", delta("b", "stop")))

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert record.ok and record.text == "ab"
    assert record.malformed_lines == ("{not json", "[1, 2]")


async def test_events_without_blank_line_separators_are_still_parsed() -> None:
    # The two JSON objects arrive as one two-line event.
    raw = f"data: {json.dumps(delta('a'))}\ndata: {json.dumps(delta('b', 'stop'))}\n\n".encode()

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=raw)

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert record.text == "ab" and record.malformed_lines == ()


async def test_error_event_inside_a_200_stream_is_a_stream_error() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=sse(delta("a"), {"error": {"message": "engine died"}}))

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert record.error is not None and record.error.kind == "stream_error" and record.text == "a"


async def test_stream_that_ends_without_finish_or_done_is_incomplete() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=sse(delta("a"), done=False))

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert record.error is not None and record.error.kind == "incomplete" and record.text == "a"


async def test_many_concurrent_streams_from_one_process() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        text = json.loads(request.content)["messages"][0]["content"]
        return httpx.Response(200, content=chunked(*(sse(delta(c)) for c in text), sse(delta("", "stop"))))

    async with client_for(handler) as client:
        records = await asyncio.gather(
            *(client.chat([{"role": "user", "content": f"user{i}"}], request_id=str(i)) for i in range(64))
        )
    assert [r.text for r in records] == [f"user{i}" for i in range(64)]


async def test_full_garbage_collections_wait_while_requests_are_in_flight() -> None:
    # A full collection over many streams' chunks stopped the loop for tens of ms (docs/performance.md).
    import gc

    before = gc.get_threshold()
    during: list[tuple[int, int, int]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        during.append(gc.get_threshold())
        return httpx.Response(200, content=chunked(sse(delta("ok", "stop"))))

    async with client_for(handler) as client:
        records = await asyncio.gather(*(client.chat([{"role": "user", "content": "x"}]) for _ in range(3)))
    assert all(r.ok for r in records)
    assert len(during) == 3 and all(t[:2] == before[:2] and t[2] > 10**6 for t in during)
    assert gc.get_threshold() == before


@pytest.mark.parametrize("peer", ["open", "closed", "unasked bytes"])
async def test_a_pooled_connection_is_reused_only_while_the_peer_keeps_it_quietly_open(peer: str) -> None:
    # llama-server closes the connection after every streamed reply without saying so: the pool asks the
    # socket itself before reuse, without waiting for the event loop's next turn to notice (issue 38)
    import socket

    from ctxbench.client.wire import Wire

    mine, theirs = socket.socketpair()
    mine.setblocking(False)
    wire = Wire(asyncio.get_running_loop(), mine)
    if peer == "closed":
        theirs.close()
    elif peer == "unasked bytes":
        theirs.send(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    assert wire.reusable() == (peer == "open")
    assert wire.closed == (peer != "open")
    wire.close()
    if peer != "closed":
        theirs.close()


async def test_log_probabilities_are_recorded_and_a_malformed_entry_is_left_out_not_raised() -> None:
    # The fidelity check reads `logprobs.content`; a server that sends an entry without a numeric logprob
    # (or an id that is not one) must still give a record, never an exception from the record's validation.
    def token(text: str, logprob: object, top: list[dict[str, object]]) -> dict[str, object]:
        entry = {"token": text, "id": 7, "logprob": logprob, "top_logprobs": top}
        return {"choices": [{"index": 0, "delta": {"content": text}, "logprobs": {"content": [entry]}}]}

    good = token(
        "a", -0.5, [{"token": "a", "id": 7, "logprob": -0.5}, {"token": "b", "id": "x", "logprob": -1.0}]
    )
    bad = token("b", None, [])
    odd_top = token("c", -0.25, [{"token": "c", "logprob": "high"}])

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=sse(good, bad, odd_top, delta("", "stop")))

    async with client_for(handler) as client:
        record = await client.chat([{"role": "user", "content": "x"}])
    assert record.ok and record.text == "abc" and record.logprobs is not None
    assert [(t.token, t.id, t.logprob) for t in record.logprobs] == [("a", 7, -0.5), ("c", 7, -0.25)]
    assert record.logprobs[0].top == (("a", 7, -0.5), ("b", None, -1.0)) and record.logprobs[1].top == ()
    async with client_for(lambda request: _plain()) as client:
        assert (await client.chat([{"role": "user", "content": "x"}])).logprobs is None  # not asked: None


async def _plain() -> httpx.Response:
    return httpx.Response(200, content=sse(delta("a", "stop")))
