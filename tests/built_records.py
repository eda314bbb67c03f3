"""Request records built with known times, for unit tests of figures computed from records."""

from __future__ import annotations

from ctxbench.records import Chunk, RequestRecord, Usage

NS = 1_000_000_000


def request(
    name: str,
    sent_s: float,
    end_s: float,
    tokens: int = 10,
    *,
    usage: bool = True,
    labels: dict[str, str] | None = None,
) -> RequestRecord:
    """A request answered at once (first chunk 0.1 s after the send), its tokens one a chunk to its end."""
    first = sent_s + 0.1
    step = (end_s - first) / (tokens - 1)
    return RequestRecord(
        request_id=name,
        endpoint="chat",
        url="http://127.0.0.1:1/v1/chat/completions",
        model="m",
        request_bytes=10,
        enqueued_ns=int(sent_s * NS),
        sent_ns=int(sent_s * NS),
        first_byte_ns=int(first * NS),
        end_ns=int(end_s * NS),
        http_status=200,
        chunks=[Chunk(arrived_ns=int((first + i * step) * NS), text="x") for i in range(tokens)],
        usage=Usage(prompt_tokens=100, completion_tokens=tokens) if usage else None,
        labels=labels or {},
    )
