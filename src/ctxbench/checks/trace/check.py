"""Trace replay: a Mooncake-format trace sent at its own times, with the prefixes its hash ids share.

Each line of the trace is one request: `timestamp` (ms), `input_length` and `output_length` (tokens) and
`hash_ids` (its prompt's blocks, `block_tokens` each), the format Mooncake published and vLLM `bench serve`,
SGLang's `bench_serving`, AIPerf and GuideLLM read. Every prompt is built token-exact before the first is due
(`text/blocks.py`: the same id is the same text wherever it appears), then sent at `timestamp x time_scale`
whatever the server does (`open_loop.send_when_due`). Each record carries the cached tokens the trace implies:
the whole blocks it shares with any earlier request, as an unbounded prefix cache would serve them; the
summary sets them beside what the server reported, and the cache audit flags reuse beyond them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...client.chat import ChatClient
from ...config.jsonl import json_values, read_lines
from ...config.param_types import MAX_TOKENS_PER_PROMPT, MAX_WAIT_S
from ...errors import CtxbenchError, UsageError
from ...measure import metrics
from ...measure.arrivals import lag_growth, lateness_s
from ...records import CacheIntent, RequestRecord
from ...render.cell import Cell
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...text.blocks import LEAD, BlockPrompts
from ...text.haystack import UnitPool, lead_tokens, request_seed
from ..base import Check, LocalFile, RunContext, StageLoad
from ..open_loop import Due, send_when_due
from .cache import implied_cached, reuse_bound
from .cell import TRACE_COLUMNS, trace_cells
from .file import TraceFile
from .labels import TraceLabels
from .params import TraceParams
from .section import console_lines, trace_section

UNIT = "trace"


class TraceFileError(UsageError):
    """A trace line that is not a Mooncake request; the message names the file, line and key."""


@dataclass(frozen=True)
class TraceRequest:
    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def read_trace(path: Path, max_requests: int | None = None) -> list[TraceRequest]:
    """The trace's requests in time order (blank lines skipped)."""
    lines = read_lines(path, TraceFileError, "the trace")
    requests = []
    for number, where, entry in json_values(path, lines, TraceFileError, "each line is one request object"):
        requests.append(_parse(where, number, entry))
        if max_requests is not None and len(requests) >= max_requests:
            break
    if not requests:
        raise TraceFileError(f"{path}: the trace has no requests; one JSON object a line")
    return sorted(requests, key=lambda r: r.timestamp_ms)


def _parse(where: str, number: int, entry: object) -> TraceRequest:
    if not isinstance(entry, dict):
        raise TraceFileError(f"{where}: a line is a JSON object with timestamp, input_length, output_length")

    def number_at(key: str, minimum: float, maximum: float) -> float:
        value = entry.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not minimum <= value <= maximum:
            raise TraceFileError(
                f"{where}: {key} is {value!r}; give a number from {minimum:g} to {maximum:g}"
            )
        return value

    ids = entry.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TraceFileError(f"{where}: hash_ids is {ids!r}; give a list of integers (the prompt's blocks)")
    return TraceRequest(
        line=number,
        timestamp_ms=number_at("timestamp", 0, MAX_WAIT_S * 1000),  # ms: a trace of at most a day
        input_length=int(number_at("input_length", 1, MAX_TOKENS_PER_PROMPT)),
        output_length=int(number_at("output_length", 1, MAX_TOKENS_PER_PROMPT)),
        hash_ids=tuple(ids),
    )


def expected_shared_blocks(requests: list[TraceRequest], whole: list[int]) -> Iterator[int]:
    """Per request (in order): the leading whole blocks it shares with any earlier request's whole blocks."""
    seen: set[tuple[int, ...]] = set()
    for request, count in zip(requests, whole, strict=True):
        ids = request.hash_ids[:count]
        shared = 0
        while shared < count and ids[: shared + 1] in seen:
            shared += 1
        yield shared
        seen.update(ids[:length] for length in range(1, count + 1))


async def run_trace(
    client: ChatClient,
    pool: UnitPool,
    params: TraceParams,
    run: RunDir,
    scope: tuple[str, ...],
    on_request: Callable[[RequestRecord], None] | None = None,
) -> dict[str, Any]:
    """Replay the trace; returns (and writes) `trace.json`."""
    requests = read_trace(params.file, params.max_requests)
    blocks = BlockPrompts(pool, params.block_tokens, (*scope, "trace"))
    lead = lead_tokens(pool.counter, lead=LEAD)
    start_ms = requests[0].timestamp_ms

    def build() -> list[Due]:
        prompts = [
            blocks.prompt(r.hash_ids, r.input_length, request_seed(*scope, "trace", r.line)) for r in requests
        ]
        shared = expected_shared_blocks(requests, [p.full_blocks for p in prompts])
        due = []
        for k, (request, prompt, blocks_shared) in enumerate(zip(requests, prompts, shared, strict=True)):
            labels = TraceLabels(
                mode="open",
                index=k,
                trace_line=request.line,
                input_length=request.input_length,
                planned_tokens=prompt.planned_tokens,
                expected_cached_tokens=blocks_shared * params.block_tokens,
                block_tokens=params.block_tokens,
                overhead_tokens=blocks.overhead_tokens,
                lead_tokens=lead,
                whole_ids=",".join(str(i) for i in request.hash_ids[: prompt.full_blocks]),
            ).written()
            # at most its whole blocks and the next one's start, had others sent them all; the audit narrows
            # this to what the requests that ran before it sent (`trace_cache.reuse_bound`)
            most = lead + (prompt.full_blocks + 1) * params.block_tokens
            intent = CacheIntent.reusing(
                "trace_blocks", lead, most, "the blocks it shares with requests that ran before it"
            )
            at_s = (request.timestamp_ms - start_ms) / 1000 * params.time_scale
            request_id = run.request_id(f"trace-{k}")
            due.append(Due(at_s, list(prompt.messages), request.output_length, request_id, labels, intent))
        return due

    extra: dict[str, object] = {"temperature": 0.0, **({"ignore_eos": True} if params.ignore_eos else {})}
    records = await send_when_due(client, run, await asyncio.to_thread(build), extra, on_request)
    summary = trace_summary(records, params, run.attempt)
    TraceFile.model_validate(summary).save(run.path)
    return summary


def trace_summary(records: list[RequestRecord], params: TraceParams, attempt: int) -> dict[str, Any]:
    """Load figures over the replay, the client's lateness, and the cached tokens expected and reported."""
    figures = metrics.throughput(records, params.ttft_slo_s, params.tpot_slo_s)
    ok = [r for r in records if r.ok]
    implied = implied_cached(records)
    expected = sum(implied[r.request_id] for r in ok)
    reported = [metrics.cached_tokens(r) for r in ok]
    lead = {r.request_id: TraceLabels.of(r).lead_tokens or 0 for r in ok}
    sharing = [r for r in ok if implied[r.request_id] > lead[r.request_id]]  # a block, not the lead alone
    served = [
        r
        for r in sharing
        if (cached := metrics.cached_tokens(r)) is not None and cached >= 0.9 * implied[r.request_id]
    ]
    # a trace line shorter than the shortest prompt ctxbench can build (template, lead and question) is
    # sent at that length: counted, and each record keeps the trace's length beside the planned one
    lengthened = [r for r in records if (r.planned_tokens or 0) > (TraceLabels.of(r).input_length or 0)]
    unreported = any(metrics.cached_tokens(r) is None for r in sharing)
    late = [lateness_s(r) for r in records]
    return {
        "spec": params.model_dump(mode="json"),
        **asdict(figures),
        "lateness_p50_s": metrics.percentile(late, 50),
        "lateness_p99_s": metrics.percentile(late, 99),
        "lag_growth": lag_growth(records),
        "expected_cached_tokens": expected,
        "reported_cached_tokens": None if any(c is None for c in reported) else sum(c or 0 for c in reported),
        # requests whose leading blocks the trace says an earlier request left in the cache, and how many of
        # them the server served at least 90% of those blocks from its cache
        "sharing_requests": len(sharing),
        "sharing_served": None if unreported else len(served),  # None: the server reported no cached tokens
        "lengthened_requests": len(lengthened),
        "prompt_tokens": sum(metrics.prompt_tokens(r) or 0 for r in ok),
        "attempt": attempt,
        "request_ids": [r.request_id for r in records],
    }


def sample_trace(
    seed: str = "ctxbench-sample-trace",
    *,
    documents: int = 3,
    document_blocks: int = 8,
    conversations: int = 6,
    turns: int = 3,
    fresh: int = 6,
    span_s: float = 120.0,
    block_tokens: int = 512,
    output_length: int = 128,
) -> list[dict[str, Any]]:
    """A Mooncake-format trace shaped like long-context traffic: long documents that several conversations
    read (their blocks shared), conversations that come back later with their history grown by a block or
    two a turn, and fresh one-off prompts that share nothing. Seeded; sorted by timestamp."""
    rng = random.Random(seed)
    next_id = iter(range(1_000_000))
    docs = [[next(next_id) for _ in range(document_blocks)] for _ in range(documents)]
    lines = []
    for user in range(conversations):
        ids = list(docs[user % documents])
        at = rng.uniform(0, span_s / (turns + 1))
        for _ in range(turns):
            lines.append((at, ids[:]))
            ids += [next(next_id) for _ in range(rng.randint(1, 2))]  # the reply and the next question
            at += rng.uniform(span_s / (turns + 1), span_s / turns)  # back after others had their turn
    for _ in range(fresh):
        lines.append(
            (rng.uniform(0, span_s), [next(next_id) for _ in range(rng.randint(1, document_blocks))])
        )
    return [
        {
            "timestamp": round(at * 1000),
            "input_length": len(ids) * block_tokens - rng.randint(0, block_tokens // 2),
            "output_length": output_length,
            "hash_ids": ids,
        }
        for at, ids in sorted(lines, key=lambda line: line[0])
    ]


class TraceCheck(Check[TraceParams]):
    name = UNIT
    counts_refusals = True  # a line longer than the server's slot is refused: counted in trace.json
    params_type = TraceParams
    needs_limit = False

    def request_count(self, params: TraceParams) -> int:
        try:
            return len(read_trace(params.file, params.max_requests))
        except CtxbenchError:
            return 0  # the check itself reports what is wrong with the file

    def longest_prompt(self, params: TraceParams, limit_tokens: int) -> int | None:
        return None  # the pool is not sized for the trace's lengths, which are known only once it is read

    def local_files(self, params: TraceParams) -> list[LocalFile]:
        instead = (
            "Give the local path of a Mooncake-format JSONL trace (examples/mooncake-sample.jsonl is one)."
        )
        return [LocalFile("file", params.file, instead)]

    def reuse_bound(self, records: Sequence[RequestRecord]) -> dict[str, int] | None:
        """What its blocks shared with the requests that reached the server before each ended (`cache.py`)."""
        return reuse_bound(records)

    def stage_load(self, parameters: Mapping[str, Any], records: Sequence[RequestRecord]) -> StageLoad:
        """The trace's own arrivals set its load: their mean rate over the replay."""
        span_s = (max(r.sent_ns for r in records) - min(r.sent_ns for r in records)) / metrics.NS
        return StageLoad(rate_qps=(len(records) - 1) / span_s if len(records) > 1 and span_s > 0 else None)

    def announce(self, params: TraceParams, ctx: RunContext) -> str | None:
        return (
            f"trace replay: {params.file} at {params.time_scale:g}x its times, "
            f"{params.block_tokens}-token blocks"
        )

    async def run(self, ctx: RunContext, params: TraceParams) -> None:
        await run_trace(ctx.client, ctx.pool, params, ctx.run, ctx.scope, on_request=ctx.advance)

    columns = TRACE_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return trace_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return trace_cells(results, run)

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)


TRACE = TraceCheck()
