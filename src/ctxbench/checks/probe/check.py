"""The probe: a few streamed chat requests, alone and concurrently, to see a deployment breathe.

It is the smallest end-to-end measurement (TTFT, decode rate, token counts from `usage`) and
what `make demo` runs until the three claims' checks exist. Every record is appended to the
run's `requests.jsonl` the moment its request ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from time import perf_counter_ns

from ...client.chat import ChatClient
from ...records import CacheIntent, RequestRecord
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...text.corpus import ProseGenerator
from ..base import Check, RunContext
from .labels import ProbeLabels
from .params import ProbeParams

QUESTIONS = (
    "What is the capital of France? Answer in one sentence.",
    "Name three colours of the rainbow.",
)


SEED = "probe"  # the long-document request's prose
SAMPLING = {"temperature": 0.0}


def probe_requests(params: ProbeParams) -> list[tuple[str, list[dict[str, str]]]]:
    """(label, messages) for each request: every question alone, then one long-document request."""
    requests = [(f"q{i}", [{"role": "user", "content": q}]) for i, q in enumerate(QUESTIONS)]
    if params.document_chars > 0:
        document = ProseGenerator(f"{SEED}-document").text(params.document_chars)
        prompt = f"{document}\n\nIn one sentence, what is the text above about?"
        requests.append(("document", [{"role": "user", "content": prompt}]))
    return requests


async def run_probe(
    client: ChatClient,
    params: ProbeParams,
    run: RunDir,
    on_record: Callable[[RequestRecord], None] | None = None,
) -> list[RequestRecord]:
    """Send each request alone (phase `alone`), then `concurrency` copies of the first question at once."""
    records: list[RequestRecord] = []

    async def send(label: str, phase: str, messages: Sequence[dict[str, str]], enqueued_ns: int) -> None:
        record = await client.chat(
            messages,
            max_tokens=params.max_tokens,
            request_id=run.request_id(f"{phase}-{label}"),
            labels=ProbeLabels(phase=phase, prompt=label).written(),
            extra_body=SAMPLING,
            enqueued_ns=enqueued_ns,
            # The probe's texts are fixed (every probe sends them; the concurrent phase repeats the first
            # question at once), and it counts no tokens: reuse it declares and the audit does not bound.
            cache=CacheIntent.reusing("same_prompt", 0, None, "the probe's fixed questions, sent again"),
        )
        run.append(record)
        records.append(record)
        if on_record is not None:
            on_record(record)

    requests = probe_requests(params)
    for label, messages in requests:
        await send(label, "alone", messages, perf_counter_ns())
    if params.concurrency > 1:
        label, messages = requests[0]
        enqueued = perf_counter_ns()
        await asyncio.gather(
            *(
                send(f"{label}-u{user}", "concurrent", messages, enqueued)
                for user in range(params.concurrency)
            )
        )
    return records


def probe_request_count(params: ProbeParams) -> int:
    return len(probe_requests(params)) + (params.concurrency if params.concurrency > 1 else 0)


class ProbeCheck(Check[ProbeParams]):
    name = "probe"
    params_type = ProbeParams
    needs_limit = False
    needs_counter = False  # fixed questions and a document of so many characters: nothing is counted

    def request_count(self, params: ProbeParams) -> int:
        return probe_request_count(params)

    def longest_prompt(self, params: ProbeParams, limit_tokens: int) -> int | None:
        return None  # its prompts are its own prose, not the document pool's

    def announce(self, params: ProbeParams, ctx: RunContext) -> str | None:
        return None

    async def run(self, ctx: RunContext, params: ProbeParams) -> None:
        await run_probe(ctx.client, params, ctx.run, ctx.advance)

    # nothing reported beyond its requests: no section, evidence column or console line

    def section(self, read: RunRead) -> list[str]:
        return []  # a handful of requests: the run report's requests table shows each


PROBE = ProbeCheck()
