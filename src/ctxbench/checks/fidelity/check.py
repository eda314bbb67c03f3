"""Cache fidelity: does an answer served from the cache equal the one the model computes cold?

At each length, one fresh document with a question, greedy, a fixed seed, the engine's log-probabilities
(`logprobs`, `top_logprobs`), `ignore_eos` (every answer `max_tokens` long). In order:

1. cold: nothing reused (llama.cpp `cache_prompt: false`; vLLM a `cache_salt` no other request carries);
2. warm: the same prompt under the first one's salt, so the engine may reuse all of it;
3. cold again (a new salt): the engine's own noise, compared with 1;
4. partial: the same document with another question under the first salt (the document reused, the tail
   recomputed), and that prompt cold (a new salt), the answer it is compared with;
5. restored: `evict_requests` fresh prompts of the same length (through the cache, pushing the document out
   of the slots), then the first prompt under its salt again: restored from a second tier where the engine
   keeps one (llama.cpp `--cache-ram`), else recomputed, as its cached tokens say;
6. load: the first prompt cold, sent with `load_users` fresh prompts at once (batch composition, reported
   apart: a difference here is batching, not the cache).

Each path's answer is compared token by token with its cold one (`fidelity.compare`); a cached path must
report what it reused (else it says so and is not judged). `fidelity.json` has every comparison.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

from ...client.chat import ChatClient
from ...measure import metrics
from ...measure.fidelity import compare, smallest_margin
from ...records import CACHE_SLACK_TOKENS, CacheIntent, RequestRecord
from ...render.cell import Cell
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ...text.haystack import UnitPool, build_haystack, lead_tokens, request_seed
from ..base import Check, Judgement, RunContext
from .cell import FIDELITY_COLUMNS, fidelity_cells, judgement_of
from .file import FidelityFile, FidelityLength, FidelityPathResult
from .labels import FidelityLabels
from .params import FidelityParams
from .section import console_lines, fidelity_section

UNIT = "fidelity"
QUESTIONS = (
    "In two sentences, what is this archive about?",
    "Which place does the archive name most often, and why?",
)
SEED = 1234  # the sampling seed every request carries (greedy: it should not matter; an engine may use it)


async def run_fidelity(
    client: ChatClient,
    pool: UnitPool,
    params: FidelityParams,
    run: RunDir,
    scope: tuple[str, ...],
    on_request: Callable[[RequestRecord], None] | None = None,
) -> FidelityFile:
    """Every length's paths, one request at a time (the load path's at once); returns (and writes)
    `fidelity.json`."""
    lead = lead_tokens(pool.counter)
    lengths = []
    for length in params.lengths:
        lengths.append(await _one_length(client, pool, params, run, scope, lead, length, on_request))
    result = FidelityFile(spec=params.model_dump(mode="json"), lengths=lengths, attempt=run.attempt)
    result.save(run.path)
    return result


async def _one_length(
    client: ChatClient,
    pool: UnitPool,
    params: FidelityParams,
    run: RunDir,
    scope: tuple[str, ...],
    lead: int,
    length: int,
    on_request: Callable[[RequestRecord], None] | None,
) -> FidelityLength:
    seed = request_seed(*scope, UNIT, length)
    asked = [
        await asyncio.to_thread(build_haystack, pool, length, seed, question=question)
        for question in QUESTIONS
    ]
    salt = (
        f"ctxbench-{seed:x}"  # unique to the run, its attempt and the length: no earlier request carries it
    )

    async def send(path: str, question: int, salted: str, cold: bool, cache: CacheIntent) -> RequestRecord:
        extra: dict[str, Any] = {
            "temperature": 0.0,
            "seed": SEED,
            "ignore_eos": True,
            "logprobs": True,
            "top_logprobs": params.top_logprobs,
            "cache_salt": f"{salt}-{salted}",
            **({"cache_prompt": False} if cold else {}),
        }
        record = await client.chat(
            asked[question].messages,
            max_tokens=params.max_tokens,
            request_id=run.request_id(f"fidelity-{length}-{path}"),
            labels=FidelityLabels(
                length=length, path=path, planned_tokens=asked[question].planned_tokens
            ).written(),
            extra_body=extra,
            cache=cache,
        )
        run.append(record)
        if on_request is not None:
            on_request(record)
        return record

    fresh = CacheIntent.fresh(lead, "a fidelity prompt computed cold")
    cold = await send("cold-1", 0, "a", True, fresh)
    prompt = metrics.prompt_tokens(cold) or length
    again = CacheIntent.reusing(
        "same_prompt", lead, prompt + params.max_tokens, "the same prompt, served warm"
    )
    results = []
    if "warm" in params.paths:
        warm = await send("warm", 0, "a", False, again)
        results.append(_result("warm", warm, cold, params, served="cached"))
    cold_again = await send("cold-2", 0, "b", True, fresh)
    results.insert(0, _result("cold", cold_again, cold, params, served="cold", lead=lead))
    if "partial" in params.paths:
        document = CacheIntent.reusing(
            "document", lead, prompt + params.max_tokens, "the document, asked again"
        )
        partial = await send("partial", 1, "a", False, document)
        partial_cold = await send("partial-cold", 1, "c", True, fresh)
        results.append(_result("partial", partial, partial_cold, params, served="cached"))
    if "restored" in params.paths:
        for k in range(params.evict_requests):
            filler = await asyncio.to_thread(
                build_haystack, pool, length, request_seed(*scope, UNIT, "evict", length, k)
            )
            record = await client.chat(
                filler.messages,
                max_tokens=params.max_tokens,
                request_id=run.request_id(f"fidelity-{length}-evict-{k}"),
                labels=FidelityLabels(length=length, path="evict").written(),
                extra_body={"temperature": 0.0, "ignore_eos": True},
                cache=fresh,
            )
            run.append(record)
            if on_request is not None:
                on_request(record)
        back = CacheIntent.reusing(
            "returning", lead, prompt + params.max_tokens, "the same prompt, coming back"
        )
        restored = await send("restored", 0, "a", False, back)
        result = _result("restored", restored, cold, params, served="either")
        reused = metrics.cached_tokens(restored)
        how = (
            "cache use not reported"
            if reused is None
            else f"{reused} tokens from the cache after {params.evict_requests} other prompts"
            if reused >= prompt // 2
            else f"recomputed after {params.evict_requests} other prompts ({reused} tokens reused)"
        )
        results.append(result.model_copy(update={"text": f"{result.text} ({how})"}))
    if "load" in params.paths:
        others = [
            client.chat(
                (
                    await asyncio.to_thread(
                        build_haystack, pool, length, request_seed(*scope, UNIT, length, k)
                    )
                ).messages,
                max_tokens=params.max_tokens,
                request_id=run.request_id(f"fidelity-{length}-load-other-{k}"),
                labels=FidelityLabels(length=length, path="load-other").written(),
                extra_body={"temperature": 0.0, "ignore_eos": True, "cache_prompt": False},
                cache=fresh,
            )
            for k in range(params.load_users)
        ]
        loaded, *rest = await asyncio.gather(send("load", 0, "d", True, fresh), *others)
        for record in rest:
            run.append(record)
            if on_request is not None:
                on_request(record)
        result = _result("load", loaded, cold, params, served="cold", lead=lead)
        results.append(
            result.model_copy(update={"text": f"{result.text} (among {params.load_users} others)"})
        )
    margin = smallest_margin(cold.logprobs or ())
    return FidelityLength(length=length, smallest_margin=margin, paths=results)


def _result(
    path: str,
    record: RequestRecord,
    reference: RequestRecord,
    params: FidelityParams,
    *,
    served: Literal["cold", "cached", "either"],
    lead: int = 0,
) -> FidelityPathResult:
    """`record` against `reference`. `served`: how the path must have been served to be compared: cold (no
    more than the lead reused), cached (at least half its prompt reused, where the engine says), either."""
    cached = metrics.cached_tokens(record)
    base = {
        "path": path,
        "request_id": record.request_id,
        "reference_id": reference.request_id,
        "cached_tokens": cached,
        "prompt_tokens": metrics.prompt_tokens(record),
    }
    failed = next((r for r in (record, reference) if r.error is not None), None)
    if failed is not None and failed.error is not None:
        error = f"{failed.request_id} failed: {failed.error.kind}: {failed.error.message[:120]}"
        return FidelityPathResult(**base, error=error, text=f"not compared ({error})")
    if not record.logprobs or not reference.logprobs:
        error = "the server sent no log-probabilities (logprobs, top_logprobs): nothing to compare"
        return FidelityPathResult(**base, error=error, text=f"not compared ({error})")
    prompt = metrics.prompt_tokens(record) or 0
    if served == "cached" and cached is not None and cached < prompt // 2:
        error = f"not served from the cache ({cached} of {prompt} tokens reused)"
        return FidelityPathResult(**base, error=error, text=f"not compared ({error})")
    if served == "cold" and cached is not None and cached > lead + CACHE_SLACK_TOKENS:
        error = (
            f"not computed cold: {cached} tokens reused (the engine honours no cache_prompt, no cache_salt)"
        )
        return FidelityPathResult(**base, error=error, text=f"not compared ({error})")
    found = compare(reference.logprobs, record.logprobs, params.drift_tolerance)
    text = found.text() + (" (cache use not reported)" if served == "cached" and cached is None else "")
    keeps = FidelityPathResult.model_fields
    kept = {k.name: getattr(found, k.name) for k in fields(found) if k.name in keeps}
    return FidelityPathResult(
        **base,
        **kept,  # the comparison's figures the file keeps (`FidelityPathResult`'s fields)
        text=text,
        reference_text=reference.text if found.first_divergence is not None else "",
        answer_text=record.text if found.first_divergence is not None else "",
    )


class FidelityCheck(Check[FidelityParams]):
    name = UNIT
    params_type = FidelityParams
    needs_limit = False

    def request_count(self, params: FidelityParams) -> int:
        return params.request_count()

    def longest_prompt(self, params: FidelityParams, limit_tokens: int) -> int | None:
        return max(params.lengths)

    def announce(self, params: FidelityParams, ctx: RunContext) -> str | None:
        return (
            f"cache fidelity: {', '.join(str(n) for n in params.lengths)} tokens, cold twice, then "
            f"{', '.join(params.paths)}, {params.max_tokens} greedy tokens compared with log-probabilities"
        )

    async def run(self, ctx: RunContext, params: FidelityParams) -> None:
        found = await run_fidelity(ctx.client, ctx.pool, params, ctx.run, ctx.scope, on_request=ctx.advance)
        for length in found.lengths:
            for path in length.paths:
                ctx.say(f"fidelity {length.length} tokens, {path.path}: {path.text}")

    columns = FIDELITY_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return fidelity_section(read)

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return fidelity_cells(results, run)

    def console(self, run: RunDir) -> list[str]:
        return console_lines(run)

    def judge(self, run: RunDir, random_weights: bool) -> Judgement:
        return judgement_of(run, random_weights)


FIDELITY = FidelityCheck()
