"""Requests sent at their due times whatever the server does (`send_when_due`): the open loop of the
many-users check's rates and of a replayed trace. Every prompt is built before the first is due, so the
client's lateness (sent - due, in each record as `sent_ns - enqueued_ns`) is scheduling alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..client.chat import ChatClient
from ..measure import metrics
from ..records import CacheIntent, RequestRecord
from ..store.run_dir import RunDir

LEAD_S = 0.2  # between the last prompt built and the first request due: the loop is idle when it starts


@dataclass(frozen=True)
class Due:
    """One open-loop request: when it is due (seconds after the first), what it sends, how it is named."""

    at_s: float
    messages: list[dict[str, str]]
    max_tokens: int
    request_id: str
    labels: dict[str, str]
    cache: CacheIntent


async def send_when_due(
    client: ChatClient,
    run: RunDir,
    requests: Sequence[Due],
    extra_body: dict[str, object],
    on_request: Callable[[RequestRecord], None] | None = None,
) -> list[RequestRecord]:
    """Send each request at its due time, whatever the server is doing, and append each record as its
    request ends. A record's `enqueued_ns` is the due time, so sent - enqueued is the client's lateness."""
    records: list[RequestRecord] = []

    async def send(request: Due, due_ns: int) -> None:
        record = await client.chat(
            request.messages,
            max_tokens=request.max_tokens,
            request_id=request.request_id,
            labels=request.labels,
            extra_body=extra_body,
            enqueued_ns=due_ns,
            cache=request.cache,
        )
        run.append(record)
        records.append(record)
        if on_request is not None:
            on_request(record)

    start_ns = time.perf_counter_ns() + int(LEAD_S * metrics.NS)
    tasks = []
    for request in requests:
        due_ns = start_ns + int(request.at_s * metrics.NS)
        wait = (due_ns - time.perf_counter_ns()) / metrics.NS
        if wait > 0:
            await asyncio.sleep(wait)
        tasks.append(asyncio.create_task(send(request, due_ns)))
    await asyncio.gather(*tasks)
    return sorted(records, key=lambda r: r.enqueued_ns)
