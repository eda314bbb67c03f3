"""Formulas over `RequestRecord`s, computed in a second pass. docs/metrics.md is the contract:
each docstring here states the same formula in the same words, and the peer definition it matches.

All stamps are `perf_counter_ns`; results are in seconds or tokens per second. A metric that
cannot be computed for a record (a failed request, a one-token answer) is `None`, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from ..records import RequestRecord
from .stats import Distribution as Distribution  # re-exported: where the metrics are summarised
from .stats import percentile as percentile

NS = 1e9
TokenSource = Literal["usage", "chunks"]


@dataclass(frozen=True)
class TokenCount:
    """A token count and where it came from: the server's `usage`, or a fallback (marked)."""

    tokens: int
    source: TokenSource


@dataclass(frozen=True)
class Gap:
    """One inter-chunk gap; `tokens` is the count of tokens it spans when known, else None."""

    gap_s: float
    tokens: int | None
    chunks: int = 1  # chunks the gap spans: more than 1 where chunks in between arrived in one read


def first_token_ns(record: RequestRecord) -> int | None:
    """Arrival of the first token event (empty text included), None when none came."""
    return record.chunks[0].arrived_ns if record.chunks else None


# The most tokens one streamed event carries on average: llama.cpp streams an event per token even when it
# accepts a speculative draft, vLLM and SGLang one per step of at most num_speculative_tokens + 1 (16 is
# llama.cpp's default --draft-max). A reply whose events carry more cannot have been stamped token by token.
MAX_TOKENS_PER_EVENT = 16


def implausible(record: RequestRecord) -> str | None:
    """Why this record's timing cannot be true, None when it can (docs/metrics.md, "Records that cannot be
    true"): a first token before the send or after the stream's last byte, or more output tokens than its
    token events can carry (`MAX_TOKENS_PER_EVENT` a event: the client missed events, so a decode window
    between the few it saw would give a rate above any the server ran at). Such a record keeps its counts;
    its TTFT, decode rate, TPOT and ITL are left out of every table."""
    first = first_token_ns(record)
    if first is not None and not record.sent_ns <= first <= record.end_ns:
        where = "before the send" if first < record.sent_ns else "after the stream's last byte"
        return f"first token {where}"
    tokens = output_tokens(record)
    events = len(record.chunks)
    if tokens is not None and tokens.source == "usage" and events and tokens.tokens > 1:
        if (tokens.tokens - 1) > MAX_TOKENS_PER_EVENT * max(events - 1, 1):
            return (
                f"{tokens.tokens} output tokens over {events} token event(s): more than "
                f"{MAX_TOKENS_PER_EVENT} a event, so the events seen cannot time the decode"
            )
    return None


def _timed(record: RequestRecord) -> bool:
    return implausible(record) is None


def queue_s(record: RequestRecord) -> float:
    """Client-side queueing: send - enqueue. Kept apart from TTFT, never hidden inside it."""
    return (record.sent_ns - record.enqueued_ns) / NS


def ttft_s(record: RequestRecord) -> float | None:
    """TTFT = (arrival of the first token event) - send, empty text included.

    A token event is any streamed choice with a content, reasoning or tool-call field (`records.Chunk`):
    vLLM streams one per token, and its first token may decode to no visible text. Matches vLLM `bench
    serve` (0.32 stamps the first event with a choice; the role announcement it also counts arrives with
    the first token on vLLM, SGLang and llama.cpp) and AIPerf; GuideLLM also starts at request send.
    `first_text_s` is the time to the first visible text. None for a record that cannot be true
    (`implausible`).
    """
    first = first_token_ns(record)
    return None if first is None or not _timed(record) else (first - record.sent_ns) / NS


def first_text_s(record: RequestRecord) -> float | None:
    """Time to first visible text = (arrival of the first token event with non-empty text, reasoning or a
    tool call) - send: what a user reading the stream waits for. Equals TTFT unless the first tokens decode
    to nothing."""
    first = next((c.arrived_ns for c in record.chunks if c.text or c.reasoning or c.tool_call), None)
    return None if first is None or not _timed(record) else (first - record.sent_ns) / NS


def e2e_s(record: RequestRecord) -> float:
    """End-to-end latency = end of the response stream - send (vLLM E2EL, AIPerf request latency)."""
    return (record.end_ns - record.sent_ns) / NS


def output_tokens(record: RequestRecord) -> TokenCount | None:
    """Output tokens = `usage.completion_tokens`; fallback: the number of token events (marked `chunks`)."""
    if record.usage is not None and record.usage.completion_tokens is not None:
        return TokenCount(record.usage.completion_tokens, "usage")
    if record.chunks:
        return TokenCount(len(record.chunks), "chunks")
    return None


def prompt_tokens(record: RequestRecord) -> int | None:
    """Prompt tokens = `usage.prompt_tokens` as the server counted them (template included)."""
    return None if record.usage is None else record.usage.prompt_tokens


def cached_tokens(record: RequestRecord) -> int | None:
    """Prompt tokens served from the prefix cache = `usage.prompt_tokens_details.cached_tokens`."""
    return None if record.usage is None else record.usage.cached_tokens


def engine_prompt_s(record: RequestRecord) -> float | None:
    """The server's own time for the prompt (llama.cpp's `timings.prompt_ms`), None where it gives none.
    Unlike TTFT it holds no HTTP, tokenizing or client scheduling: on a busy host those vary several-fold."""
    prompt_ms = (record.server_timings or {}).get("prompt_ms")
    return prompt_ms / 1000 if isinstance(prompt_ms, (int, float)) and prompt_ms > 0 else None


def ttft_outside_prefill_s(record: RequestRecord) -> float | None:
    """TTFT - the engine's own prompt time: sending and reading the body, tokenizing, queueing, and the first
    token's way back (and, on llama.cpp, saving an idle slot's prompt to its cache); None where either is."""
    ttft, prompt = ttft_s(record), engine_prompt_s(record)
    return None if ttft is None or prompt is None else ttft - prompt


def decode_time_s(record: RequestRecord) -> float | None:
    """Decode time = last token event's arrival - first token event's arrival."""
    if len(record.chunks) < 2 or not _timed(record):
        return None
    return (record.chunks[-1].arrived_ns - record.chunks[0].arrived_ns) / NS


def own_stamps(record: RequestRecord) -> list[int]:
    """Indices of the text chunks whose arrival stamp is their own.

    Events that arrive in one read share that read's stamp, the receive time of its latest packet (a
    client descheduled, or an event loop held up, while the server kept streaming; loopback TCP also
    merges packets queued unread). Only the last event of such a run arrived at its stamp; the earlier
    ones arrived before it, at times the client cannot know. Runs of equal stamps in a record are these
    groups, so a record says by itself which events share a stamp."""
    chunks = record.chunks
    return [
        i
        for i in range(len(chunks))
        if i + 1 == len(chunks) or chunks[i + 1].arrived_ns != chunks[i].arrived_ns
    ]


def shared_stamp_events(record: RequestRecord) -> int:
    """Text chunks whose stamp is not their own (they arrived in one read with a later event)."""
    return len(record.chunks) - len(own_stamps(record))


def decode_rate(record: RequestRecord) -> float | None:
    """Decode rate (per user) = (output tokens - 1) / (last token time - first token time), tokens/s.

    The first token is excluded because its time is TTFT. Token times are token events' arrivals, empty
    text included (`records.Chunk`). Unlike 1/TPOT in vLLM `bench serve`, the window ends at the last
    token event, not at the end of the stream (the trailing usage chunk and [DONE] are not decoding).
    Equals AIPerf's "output token throughput per user" when the stream ends with the last token. None for
    a record that cannot be true (`implausible`).

    Where the first chunks arrived in one read (`own_stamps`), the window starts at the last of them,
    the first chunk whose stamp is its own, and counts the tokens after it: (output tokens - 1) x
    (chunks after it) / (chunks - 1). When every chunk shares one stamp there is no window: None,
    never a number that is not a measurement.
    """
    tokens = output_tokens(record)
    chunks = record.chunks
    if tokens is None or tokens.tokens < 2 or len(chunks) < 2 or not _timed(record):
        return None
    start = own_stamps(record)[0]
    window = (chunks[-1].arrived_ns - chunks[start].arrived_ns) / NS
    if start == len(chunks) - 1 or window <= 0:
        return None
    return (tokens.tokens - 1) * (len(chunks) - 1 - start) / (len(chunks) - 1) / window


def tpot_s(record: RequestRecord) -> float | None:
    """TPOT = (E2E latency - TTFT) / (output tokens - 1). Matches vLLM `bench serve` TPOT and
    AIPerf/GuideLLM inter-token latency; GuideLLM's own "TPOT" (E2E / output tokens) includes TTFT.
    None for a record that cannot be true (TTFT is None then)."""
    tokens = output_tokens(record)
    ttft = ttft_s(record)
    if tokens is None or ttft is None or tokens.tokens < 2:
        return None
    return (e2e_s(record) - ttft) / (tokens.tokens - 1)


def itl(record: RequestRecord) -> list[Gap]:
    """ITL = the gaps between consecutive token events (empty text included), each with its token count
    when known.

    A chunk's token count is known (1) when the server's completion tokens equal the number of
    token events, i.e. one token per event; otherwise `tokens` is None. Chunks that arrived in one read
    with a later one (`own_stamps`) are not gap ends: the gap spans them and counts their tokens. Matches vLLM
    `bench serve` ITL (per-event gaps, empty events included) but for one gap: vLLM also counts the gap
    from its role announcement to the first token, which ctxbench does not (both arrive together), and
    AIPerf's inter-chunk latency. Empty for a record that cannot be true (`implausible`).
    """
    if not _timed(record):
        return []
    chunks = record.chunks
    tokens = output_tokens(record)
    per_chunk = (
        1 if tokens is not None and tokens.source == "usage" and tokens.tokens == len(chunks) else None
    )
    own = own_stamps(record)
    # A gap between chunks that arrived in one read is no measurement: from one chunk whose stamp is its
    # own to the next such chunk is one gap spanning every chunk in between.
    return [
        Gap((chunks[b].arrived_ns - chunks[a].arrived_ns) / NS, None if per_chunk is None else b - a, b - a)
        for a, b in pairwise(own)
    ]


@dataclass(frozen=True)
class Summary:
    """Per-request metrics over a set of records; failed requests are counted, not measured."""

    requests: int
    failed: int
    ttft_s: Distribution
    decode_rate: Distribution
    tpot_s: Distribution
    itl_s: Distribution
    e2e_s: Distribution
    queue_s: Distribution
    output_tokens_source: frozenset[TokenSource]


def summarize(records: Sequence[RequestRecord]) -> Summary:
    """Distributions of the per-request metrics over the successful records."""
    ok = [r for r in records if r.ok]
    sources = frozenset(t.source for t in (output_tokens(r) for r in ok) if t is not None)
    return Summary(
        requests=len(records),
        failed=len(records) - len(ok),
        ttft_s=Distribution.of(ttft_s(r) for r in ok),
        decode_rate=Distribution.of(decode_rate(r) for r in ok),
        tpot_s=Distribution.of(tpot_s(r) for r in ok),
        itl_s=Distribution.of(g.gap_s for r in ok for g in itl(r) if g.chunks == 1),
        e2e_s=Distribution.of(e2e_s(r) for r in ok),
        queue_s=Distribution.of(queue_s(r) for r in ok),
        output_tokens_source=sources,
    )


def tokens_per_chunk(record: RequestRecord) -> float | None:
    """Output tokens / token events. Above 1 when the server streams several tokens at once, as speculative
    decoding does when it accepts a draft: then chunk gaps (ITL) arrive in bursts and are not per token."""
    tokens = output_tokens(record)
    if tokens is None or not record.chunks:
        return None
    return tokens.tokens / len(record.chunks)


def meets_slo(record: RequestRecord, ttft_slo_s: float | None, tpot_slo_s: float | None) -> bool:
    """A successful request within every limit given (TTFT <= its limit, TPOT <= its limit), as vLLM
    `bench serve --goodput` counts; a request with one output token has no TPOT and meets that limit."""
    if not record.ok:
        return False
    ttft, tpot = ttft_s(record), tpot_s(record)
    if ttft_slo_s is not None and (ttft is None or ttft > ttft_slo_s):
        return False
    return tpot_slo_s is None or tpot is None or tpot <= tpot_slo_s


@dataclass(frozen=True)
class Throughput:
    """One concurrency level of closed-loop users, over its measured (non-warm-up) requests."""

    requests: int
    failed: int
    window_s: float  # first measured send -> last measured end
    output_tokens: int
    output_tokens_per_s: float | None
    requests_per_s: float | None
    goodput_requests: int
    goodput_per_s: float | None
    ttft_s: Distribution
    tpot_s: Distribution
    decode_rate: Distribution  # per request: what one user sees
    queue_s: Distribution  # client-side: enqueued (prompt building included) -> sent
    tokens_per_chunk: Distribution


def throughput(
    records: Sequence[RequestRecord], ttft_slo_s: float | None = None, tpot_slo_s: float | None = None
) -> Throughput:
    """Aggregate output tokens/s = sum of output tokens of successful requests / window, the window running
    from the first send to the last end (vLLM `bench serve` "output token throughput" divides by the
    benchmark duration the same way). Requests/s counts successful requests; goodput counts those within
    the SLOs (`meets_slo`)."""
    ok = [r for r in records if r.ok]
    window = (max(r.end_ns for r in records) - min(r.sent_ns for r in records)) / NS if records else 0.0
    tokens = sum((output_tokens(r) or TokenCount(0, "usage")).tokens for r in ok)
    good = sum(1 for r in ok if meets_slo(r, ttft_slo_s, tpot_slo_s))
    per_s = lambda n: n / window if window > 0 else None  # noqa: E731
    return Throughput(
        requests=len(records),
        failed=len(records) - len(ok),
        window_s=window,
        output_tokens=tokens,
        output_tokens_per_s=per_s(tokens),
        requests_per_s=per_s(len(ok)),
        goodput_requests=good,
        goodput_per_s=per_s(good),
        ttft_s=Distribution.of((ttft_s(r) for r in ok), bounds=True),
        tpot_s=Distribution.of((tpot_s(r) for r in ok), bounds=True),
        decode_rate=Distribution.of((decode_rate(r) for r in ok), bounds=True),
        queue_s=Distribution.of((queue_s(r) for r in records), bounds=True),
        tokens_per_chunk=Distribution.of(tokens_per_chunk(r) for r in ok),
    )


def spec_acceptance(deltas: Mapping[str, float]) -> tuple[float | None, float | None]:
    """From the engine's speculative-decoding counters over a phase (after - before, common names):
    acceptance rate = accepted draft tokens / draft tokens proposed; accepted tokens per step = accepted
    draft tokens / drafting steps (vLLM's "mean acceptance length" is this + 1, counting the token the
    target model adds each step)."""
    drafted, accepted, steps = (
        deltas.get(k) for k in ("spec_draft_tokens", "spec_accepted_tokens", "spec_drafts")
    )
    rate = accepted / drafted if drafted and accepted is not None else None
    per_step = accepted / steps if steps and accepted is not None else None
    return rate, per_step
