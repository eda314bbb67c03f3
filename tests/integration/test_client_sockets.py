"""The client over real loopback sockets: long silences and large bodies."""

from __future__ import annotations

from loopback import ScriptedSse

from ctxbench.client.stream import Client, Timeouts
from ctxbench.measure import metrics
from ctxbench.records import RequestRecord

EVENTS: list[dict[str, object]] = [
    {"choices": [{"delta": {"content": "late"}, "finish_reason": None}]},
    {"choices": [{"delta": {"content": " answer"}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
]


async def ask(server: ScriptedSse, timeouts: Timeouts | None = None, content: str = "x") -> RequestRecord:
    """One chat request to `server` over a real loopback socket; the server is closed afterwards."""
    url = await server.start()
    try:
        async with Client(url, "m", timeouts=timeouts) as client:
            return await client.chat([{"role": "user", "content": content}])
    finally:
        await server.close()


async def test_a_silent_prefill_longer_than_a_second_is_waited_for() -> None:
    record = await ask(ScriptedSse(EVENTS, delay_s=1.5), Timeouts(read_s=5))
    assert record.ok, record.error
    ttft = metrics.ttft_s(record)
    assert ttft is not None and ttft >= 1.5
    assert record.text == "late answer"


async def test_silence_beyond_the_read_timeout_is_a_recorded_timeout() -> None:
    record = await ask(ScriptedSse(EVENTS, delay_s=1.5), Timeouts(read_s=0.3))
    assert record.error is not None and record.error.kind == "timeout"
    assert not record.retried


async def test_total_timeout_bounds_the_whole_request() -> None:
    record = await ask(ScriptedSse(EVENTS, delay_s=1.5), Timeouts(read_s=5, total_s=0.3))
    assert record.error is not None and record.error.kind == "timeout" and "total" in record.error.message


async def test_a_four_megabyte_body_arrives_whole() -> None:
    server = ScriptedSse(EVENTS)
    record = await ask(server, content="é" * (2 * 1024 * 1024))  # 4 MiB of UTF-8
    assert record.ok
    assert server.body_sizes == [record.request_bytes] and record.request_bytes > 4 * 1024 * 1024


async def test_a_request_carries_the_headers_it_is_given() -> None:
    # the agent-sessions check names each request's session (`session_header`), like MLPerf's agentic client
    server = ScriptedSse(EVENTS)
    url = await server.start()
    try:
        async with Client(url, "m") as client:
            named = await client.chat([{"role": "user", "content": "x"}], headers={"X-Session-ID": "s-7"})
            plain = await client.chat([{"role": "user", "content": "x"}])
    finally:
        await server.close()
    assert named.ok and plain.ok
    first, second = (head.decode().lower().split("\r\n") for head in server.heads)
    assert "x-session-id: s-7" in first and "content-type: application/json" in first
    assert not any(line.startswith("x-session-id") for line in second)
