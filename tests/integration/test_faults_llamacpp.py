"""Faults injected between ctxbench and the real llama-server: each becomes a recorded result, never a crash,
and a run that meets them goes on and counts them."""

from __future__ import annotations

import pytest
from loopback import FaultProxy

from ctxbench.client.stream import Client, Timeouts
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.measure import metrics

pytestmark = pytest.mark.engine
ASK = [{"role": "user", "content": "Tell me about the harbour."}]
EXACT = {"temperature": 0.0, "ignore_eos": True}


async def through(
    server: LlamaServer,
    fault: str,
    timeouts: Timeouts | None = None,
    delay_s: float = 1.5,
):
    proxy = FaultProxy(server.port, fault, delay_s=delay_s)
    url = await proxy.start()
    try:
        async with Client(url, "tiny", timeouts=timeouts) as client:
            return await client.chat(ASK, max_tokens=16, extra_body=EXACT)
    finally:
        await proxy.close()


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("reset", "disconnected"),
        ("http500", "http_status"),
        ("http429", "http_status"),
    ],
)
async def test_failures_are_recorded_with_their_kind(tiny_server: LlamaServer, fault: str, kind: str) -> None:
    record = await through(tiny_server, fault)
    assert record.error is not None and record.error.kind == kind, record.error
    assert not record.retried  # the request reached the server (or its stand-in): never sent twice


async def test_reset_mid_stream_keeps_the_partial_answer(tiny_server: LlamaServer) -> None:
    record = await through(tiny_server, "reset")
    assert record.first_byte_ns is not None and len(record.chunks) <= 1


async def test_429_keeps_the_servers_retry_after(tiny_server: LlamaServer) -> None:
    record = await through(tiny_server, "http429")
    assert (
        record.error is not None
        and "HTTP 429" in record.error.message
        and "Retry-After: 7" in record.error.message
    )


@pytest.mark.parametrize("fault", ["malformed", "truncated"])
async def test_bad_sse_lines_are_recorded_and_the_answer_completes(
    tiny_server: LlamaServer, fault: str
) -> None:
    record = await through(tiny_server, fault)
    assert record.ok, record.error
    assert (
        len(record.malformed_lines) == 1 and record.usage is not None and record.usage.completion_tokens == 16
    )


async def test_first_byte_past_the_read_timeout_and_a_stalled_stream_are_timeouts(
    tiny_server: LlamaServer,
) -> None:
    late = await through(tiny_server, "late", Timeouts(read_s=0.5))
    # The proxy holds the server's whole answer before its first byte, so the stalled request's first byte
    # comes as late as a healthy answer through the same proxy ends: on a busy host, past 0.5 s (the flake).
    # Its read timeout is three healthy answers long, and the stall three timeouts long.
    healthy = await through(tiny_server, "none")
    assert healthy.ok, healthy.error
    read_s = max(0.5, 3 * (healthy.end_ns - healthy.sent_ns) / 1e9)
    stalled = await through(tiny_server, "stall", Timeouts(read_s=read_s), delay_s=3 * read_s)
    assert late.error is not None and late.error.kind == "timeout" and late.first_byte_ns is None
    assert stalled.error is not None and stalled.error.kind == "timeout" and stalled.first_byte_ns is not None


async def test_a_run_that_meets_every_fault_goes_on_and_counts_them(tiny_server: LlamaServer) -> None:
    faults = ["none", "reset", "http500", "malformed", "late", "http429", "none"]
    # Only the late answer gets the short read timeout (its first byte comes 1.5 s late): on a busy host a
    # healthy answer from the real server can be silent for more than 0.5 s, and that was a fifth "failure".
    records = [
        await through(tiny_server, fault, Timeouts(read_s=0.5) if fault == "late" else None)
        for fault in faults
    ]
    summary = metrics.summarize(records)
    assert summary.requests == 7 and summary.failed == 4  # reset, 500, late, 429; malformed still completes
    assert records[-1].ok
