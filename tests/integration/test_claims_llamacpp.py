"""Claims 1 and 2 against the real llama-server with the tiny model (2 slots of 2048 tokens)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.checks.capacity import CapacityParams
from ctxbench.checks.capacity.check import run_capacity
from ctxbench.checks.needle import NeedleParams
from ctxbench.checks.needle.check import recall_by_length, run_needle
from ctxbench.client.stream import Client
from ctxbench.engines.limits import read_context_limit
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel, demo_model_path
from ctxbench.engines.prom import common_metrics
from ctxbench.errors import UsageError
from ctxbench.store.run_dir import RunDir
from ctxbench.text.gguf_vocab import gguf_token_counter
from ctxbench.text.haystack import UnitPool, build_haystack, request_seed
from ctxbench.text.tokens import HfTokenCounter, ServerTokenCounter

from .conftest import TINY_SLOT_CONTEXT

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def pool(tiny: TinyModel) -> UnitPool:
    return UnitPool.generated(HfTokenCounter.from_path(tiny.tokenizer_dir), units=1024)


@pytest.mark.parametrize("length", [300, 777, 1500, 2000])
@pytest.mark.parametrize("depth", [None, 0.1, 0.9])
async def test_planned_count_is_what_the_server_counts(
    tiny_server: LlamaServer, pool: UnitPool, length: int, depth: float | None
) -> None:
    haystack = build_haystack(pool, length, request_seed("exact", length, depth), depth=depth)
    async with Client(tiny_server.base_url, "tiny") as client:
        record = await client.chat(haystack.messages, max_tokens=1)
    assert record.ok, record.error
    assert record.usage is not None and record.usage.prompt_tokens == length == haystack.planned_tokens


def test_server_tokenizer_counts_like_the_local_one(tiny_server: LlamaServer, pool: UnitPool) -> None:
    server = ServerTokenCounter(tiny_server.base_url, "tiny")
    haystack = build_haystack(pool, 1200, 5, depth=0.5)
    try:
        assert server.count_chat(haystack.messages) == 1200
        assert server.count_many(pool.texts[:20]) == pool.counter.count_many(pool.texts[:20])
    finally:
        server.close()


def test_limit_is_read_per_slot_from_the_server(tiny_server: LlamaServer) -> None:
    limit = read_context_limit(tiny_server.base_url)
    assert limit.tokens == TINY_SLOT_CONTEXT and "n_ctx" in limit.source


async def test_capacity_holds_with_exact_count_and_a_clean_rejection(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path
) -> None:
    run = RunDir.create(tmp_path, "capacity")
    async with Client(tiny_server.base_url, "tiny") as client:
        result = await run_capacity(
            client,
            pool,
            read_context_limit(tiny_server.base_url),
            CapacityParams(),
            run,
            ("test", "tiny", "capacity"),
        )
    assert result.holds, result
    assert result.accepted and result.count_error_tokens == 0
    assert result.prompt_tokens == TINY_SLOT_CONTEXT - 32
    assert result.prefill_tokens_per_s is not None and result.prefill_tokens_per_s > 0
    assert result.over_limit_rejected and "exceeds the available context size" in result.over_limit_outcome
    assert [r.request_id for r in run.records()] == ["capacity-near", "capacity-over"]
    assert (run.path / "capacity.json").exists()


async def test_needle_grid_sends_fresh_prompts_and_logs_each(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path
) -> None:
    run = RunDir.create(tmp_path, "needle")
    spec = NeedleParams(lengths=[600, 1500], depths=[0.1, 0.5, 0.9], max_tokens=8)
    async with Client(tiny_server.base_url, "tiny") as client:
        trials = await run_needle(client, pool, spec, run, ("test", "tiny", "fresh"), TINY_SLOT_CONTEXT)
    assert len(trials) == 6 and all(t.error is None for t in trials)
    assert all(t.count_error_tokens == 0 for t in trials)
    # Every prompt is fresh: the server served nothing beyond the template's opening from its cache.
    assert not any(t.cache_hit_suspected for t in trials), [t.cached_tokens for t in trials]
    assert max(t.cached_tokens or 0 for t in trials) < 12
    assert len((run.path / "niah.log").read_text().splitlines()) == 6
    assert sum(n for _, n in recall_by_length(trials).values()) == 6  # random weights: k is noise, n is not


def test_the_limit_is_read_for_the_model_requests_name(tiny_server: LlamaServer) -> None:
    # Issue 57: the limit came from the first model /v1/models lists, and a name it does not list passed.
    assert read_context_limit(tiny_server.base_url, model="tiny").tokens == TINY_SLOT_CONTEXT
    with pytest.raises(
        UsageError, match=r"/v1/models lists 'tiny', not 'm2': set --model to the model to measure"
    ):
        read_context_limit(tiny_server.base_url, model="m2")


@pytest.mark.breaks_run_invariants("the seed's mistake, made on purpose: a fresh prompt sent again")
async def test_a_reused_seed_is_detected_as_a_cache_hit(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path
) -> None:
    run = RunDir.create(tmp_path, "reused")
    spec = NeedleParams(lengths=[1500], depths=[0.5, 0.5], max_tokens=4, control=0)
    async with Client(tiny_server.base_url, "tiny") as client:
        scope = ("test", "tiny", "reused")
        trials = await run_needle(client, pool, spec, run, scope, TINY_SLOT_CONTEXT, reuse_seed=True)
    assert [t.cache_hit_suspected for t in trials] == [False, True]
    assert "CACHE-HIT-SUSPECTED" in (run.path / "niah.log").read_text()


async def test_length_over_the_limit_is_skipped_with_a_reason(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path
) -> None:
    run = RunDir.create(tmp_path, "skip")
    spec = NeedleParams(lengths=[4000], depths=[0.5], control=0)
    async with Client(tiny_server.base_url, "tiny") as client:
        (trial,) = await run_needle(client, pool, spec, run, ("test", "tiny", "skip"), TINY_SLOT_CONTEXT)
    assert (
        trial.skipped is not None
        and "over the server's limit" in trial.skipped
        and "--force" in trial.skipped
    )
    assert list(run.records()) == []


async def test_smollm2_gguf_vocabulary_counts_like_the_server(demo_server: LlamaServer) -> None:
    counter = gguf_token_counter(demo_model_path())
    pool = UnitPool.generated(counter, units=512)
    haystack = build_haystack(pool, 3000, 99, depth=0.5)
    async with Client(demo_server.base_url, "smollm2") as client:
        record = await client.chat(haystack.messages, max_tokens=1)
    assert record.usage is not None and record.usage.prompt_tokens == 3000


@pytest.mark.breaks_run_invariants("the seed's mistake, made on purpose, and records rewritten")
async def test_cache_audit_catches_a_reused_seed_reported_or_not(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path
) -> None:
    from ctxbench.audits.prefix_cache import audit_run

    run = RunDir.create(tmp_path, "audit")
    # The engine's own counter around the check, as the suite takes it (metrics.jsonl).
    run.append_metrics("needle", "before", [tiny_server.metrics()], common_metrics)
    async with Client(tiny_server.base_url, "tiny") as client:
        await run_needle(
            client,
            pool,
            NeedleParams(lengths=[1900], depths=[0.9, 0.5, 0.1, 0.7], max_tokens=2, control=0),
            run,
            ("test", "audit"),
            TINY_SLOT_CONTEXT,
        )
        # The seed's mistake: the same seed again, so the same document as the first prompt above.
        await run_needle(
            client,
            pool,
            NeedleParams(lengths=[1900], depths=[0.9], max_tokens=2, control=0),
            run,
            ("test", "audit"),
            TINY_SLOT_CONTEXT,
            reuse_seed=True,
        )
    run.append_metrics("needle", "after", [tiny_server.metrics()], common_metrics)
    assert [f.kind for f in audit_run(run).findings] == ["fresh_cache_hit", "counter_beyond_intent"]
    assert [r.request_id for r in run.records()][-1] == "needle-reused-seed-1900-0.90"  # its own id
    # No cached tokens in `usage`: llama.cpp's own timings still say what it computed (cache_n).
    records = [json.loads(line) for line in run.requests_path.read_text().splitlines()]
    for record in records:
        record["usage"]["cached_tokens"] = None
    run.requests_path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert [f.kind for f in audit_run(run).findings] == ["fresh_cache_hit", "counter_beyond_intent"]
    # An engine that says nothing of its cache: the audit still sees a prefill far too fast to be real.
    for record in records:
        record["server_timings"] = None
    run.requests_path.write_text("".join(json.dumps(record) + "\n" for record in records))
    audit = audit_run(run)
    assert [f.kind for f in audit.findings] == ["too_fast", "counter_beyond_intent"], audit.findings
    # The engine's counter rose by the document served again (1,900 tokens), whatever the records say.
    (bound,) = audit.counter_bounds
    assert bound.check == "needle" and bound.allowed is not None and bound.engine_hits > bound.allowed + 1500
