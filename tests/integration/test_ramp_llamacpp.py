"""Claim 3 against the real llama-server (tiny model): the ramp, and a real decode stall."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbench.checks.ramp import RampParams
from ctxbench.checks.ramp.check import run_ramp
from ctxbench.checks.ramp.labels import user_of
from ctxbench.checks.ramp.table import read_rows
from ctxbench.client.stream import Client
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServer, LlamaServerConfig
from ctxbench.engines.models import TinyModel
from ctxbench.measure import decode_stall, metrics
from ctxbench.report.run_report import run_report
from ctxbench.store.run_dir import RunDir
from ctxbench.text.haystack import UnitPool, build_haystack
from ctxbench.text.tokens import HfTokenCounter

pytestmark = pytest.mark.engine
SLOT = 16384


@pytest.fixture(scope="module")
def wide_server(
    llama_build: LlamaCppBuild, tiny: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    config = LlamaServerConfig(
        binary=llama_build.server, model=tiny.gguf, ctx_size=2 * SLOT, parallel=2, alias="tiny"
    )
    with LlamaServer(config, tmp_path_factory.mktemp("wide") / "server.log") as server:
        yield server


@pytest.fixture(scope="module")
def pool(tiny: TinyModel) -> UnitPool:
    return UnitPool.generated(HfTokenCounter.from_path(tiny.tokenizer_dir), units=1024)


async def test_second_user_prefill_slows_the_first_users_decode(
    wide_server: LlamaServer, pool: UnitPool
) -> None:
    short = build_haystack(pool, 200, 1)
    long = build_haystack(pool, SLOT - 64, 2)
    sampling = {"temperature": 0.0, "ignore_eos": True}
    async with Client(wide_server.base_url, "tiny") as client:

        async def newcomer():
            await asyncio.sleep(0.3)
            return await client.chat(
                long.messages, max_tokens=4, extra_body=sampling, labels={"user": "1"}, request_id="b"
            )

        decoding, arriving = await asyncio.gather(
            client.chat(
                short.messages, max_tokens=4000, extra_body=sampling, labels={"user": "0"}, request_id="a"
            ),
            newcomer(),
        )
    assert decoding.ok and arriving.ok, (decoding.error, arriving.error)
    stalls = decode_stall.user_stalls([decoding, arriving], user_of)
    figure = stalls["a"]
    assert figure is not None and figure.time_inside_s > 0.05, "the prefill did not overlap the decode"
    assert figure.rate_inside is not None and figure.rate_outside is not None and figure.factor is not None
    # How much slower is a measurement (benchmarks/decode_stall.py: about 1700 -> 2 tokens/s on 2 cores), not
    # a test. What is tested: every token the engine says it generated for the first user is counted once,
    # inside the engine's prefill window or outside it.
    generated = metrics.output_tokens(decoding)
    assert generated is not None and generated.tokens == decoding.server_timings["predicted_n"] == 4000
    assert figure.tokens_inside + figure.tokens_outside == pytest.approx(generated.tokens - 1)
    # llama-server says how long it spent on the prompt: that draws the window, inside send -> first token.
    engine, client = (
        decode_stall.prefill_window(arriving),
        (arriving.sent_ns, metrics.first_token_ns(arriving)),
    )
    assert figure.window == "engine" and client[0] <= engine.start_ns < engine.end_ns == client[1]
    assert (engine.end_ns - engine.start_ns) / 1e9 == pytest.approx(
        metrics.engine_prompt_s(arriving), abs=1e-6
    )
    print("stall:", decode_stall.format_stall(figure), f"over {figure.time_inside_s:.2f} s of prefill")
    assert stalls["b"] is not None and stalls["b"].time_inside_s == 0  # the newcomer itself decodes after


async def test_ramp_grows_each_conversation_exactly_and_reuses_its_history(
    wide_server: LlamaServer, pool: UnitPool, tmp_path: Path
) -> None:
    run = RunDir.create(tmp_path, "ramp")
    spec = RampParams(
        start=1000,
        end=4000,
        turns=3,
        max_tokens=48,
        users=[1, 2],
        stagger_s=0.2,
        ignore_eos=True,
    )
    async with Client(wide_server.base_url, "tiny") as client:
        turns = await run_ramp(
            client,
            pool,
            spec,
            run,
            ("test", "tiny", "ramp"),
            deployment="tiny-cpu",
            table=tmp_path / "ramp1m.csv",
        )
    assert len(turns) == 3 + 6 and all(t.error is None for t in turns)
    rows = read_rows(tmp_path / "ramp1m.csv")
    assert [(r.users, r.user, r.turn) for r in rows] == [
        ("1", "0", "1"),
        ("1", "0", "2"),
        ("1", "0", "3"),
        ("2", "0", "1"),
        ("2", "0", "2"),
        ("2", "0", "3"),
        ("2", "1", "1"),
        ("2", "1", "2"),
        ("2", "1", "3"),
    ]
    for row in rows:
        assert row.context_tokens == row.target_tokens, row
        assert row.recall in ("0", "1")
        # A decode rate wherever one was measured: missing only for a reply the client read in one go (all its
        # chunks share a stamp), as a busy 2-core host does to a fast tiny model.
        record = next(r for r in run.records() if r.request_id == row.request_id)
        assert float(row.decode_tokens_per_s or 0) > 0 or metrics.own_stamps(record) == [
            len(record.chunks) - 1
        ]
        if row.turn != "1":
            # The conversation's own history comes back from the slot's cache, as intended.
            assert int(row.cached_tokens) >= int(row.intended_cached_tokens) - 64, row
    single = [r for r in rows if r.users == "1"]
    assert all(r.stall_rate_inside == "" for r in single)
    run.write_manifest({"deployment": "tiny-cpu"})
    report = run_report(run)
    assert "## Claim 3, the conversation ramp" in report and "1 user: recall" in report
    assert (run.path / "timeline-u2.png").stat().st_size > 10_000 and (run.path / "timeline-u2.svg").exists()


@pytest.mark.parametrize("on_failure", ["stop", "continue"])
async def test_turn_over_the_limit_is_a_recorded_capacity_failure(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path, on_failure: str
) -> None:
    # tiny_server has 2 slots of 2048 tokens: turns at 1000, 1732, 3000 and 5196 tokens, the last two over.
    run = RunDir.create(tmp_path, "over")
    spec = RampParams(
        start=1000,
        end=5196,
        turns=4,
        max_tokens=16,
        users=[1],
        on_failure=on_failure,
        ignore_eos=True,
    )
    async with Client(tiny_server.base_url, "tiny") as client:
        turns = await run_ramp(
            client,
            pool,
            spec,
            run,
            ("test", "over", on_failure),
            deployment="tiny",
            table=tmp_path / "ramp1m.csv",
        )
    assert [t.error is None for t in turns] == (
        [True, True, False] if on_failure == "stop" else [True, True, False, False]
    )
    assert turns[2].error is not None and turns[2].error.startswith("context_limit")
    rows = read_rows(tmp_path / "ramp1m.csv")
    assert rows[2].error.startswith("context_limit") and rows[2].recall == "" and rows[2].ttft_s == ""
