"""Cache fidelity against the real llama-server (tiny model, 2 slots of 2048 tokens): cold twice is bit for
bit the same, and warm, partly cached and under load come back with the same tokens; then through a proxy
that alters what the cached requests get back, as a faulty cache would, the check says so and the
deployment's verdict fails (issue 54)."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopback import AlteringProxy

from ctxbench.checks.fidelity import FIDELITY
from ctxbench.checks.fidelity.check import run_fidelity
from ctxbench.checks.fidelity.file import FidelityFile
from ctxbench.checks.fidelity.params import FidelityParams
from ctxbench.checks.fidelity.section import drift_by_position, fidelity_section
from ctxbench.client.stream import Client
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel
from ctxbench.render.run_read import RunRead
from ctxbench.results.evidence import Facts, status_of
from ctxbench.store.run_dir import RunDir
from ctxbench.store.run_files import Manifest
from ctxbench.text.haystack import UnitPool
from ctxbench.text.tokens import HfTokenCounter

pytestmark = pytest.mark.engine
SPEC = FidelityParams(lengths=[600, 1500], max_tokens=12, load_users=2)


@pytest.fixture(scope="module")
def pool(tiny: TinyModel) -> UnitPool:
    return UnitPool.generated(HfTokenCounter.from_path(tiny.tokenizer_dir), units=1024)


async def fidelity(url: str, pool: UnitPool, run: RunDir) -> FidelityFile:
    async with Client(url, "tiny") as client:
        return await run_fidelity(client, pool, SPEC, run, ("test", run.run_id))


async def test_llama_server_answers_the_same_from_its_cache(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path
) -> None:
    run = RunDir.create(tmp_path, "faithful")
    data = await fidelity(tiny_server.base_url, pool, run)
    assert FidelityFile.load(run.path) == data
    for length in data.lengths:
        paths = {p.path: p for p in length.paths}
        assert list(paths) == ["cold", "warm", "partial", "restored", "load"]
        # Cold twice: llama.cpp on the CPU computes the same prompt bit for bit (its own noise floor is 0).
        assert paths["cold"].bitwise and paths["cold"].cached_tokens == 0, paths["cold"]
        # Warm reused all but the last prompt token; partial the document before the new question.
        assert paths["warm"].cached_tokens == length.length - 1, paths["warm"]
        prompt = paths["partial"].prompt_tokens or 0
        assert (
            paths["partial"].cached_tokens is not None
            and prompt / 2 < paths["partial"].cached_tokens < prompt
        )
        # Restored: two other prompts took both slots; llama.cpp's host-RAM prompt cache (8 GiB by default)
        # gave the document back (as the partial path last left it: the document, another question).
        restored = paths["restored"].cached_tokens
        assert restored is not None and length.length / 2 < restored, paths["restored"]
        assert "tokens from the cache after 2 other prompts" in paths["restored"].text
        for name in ("warm", "partial", "restored", "load"):
            assert paths[name].holds and paths[name].compared == SPEC.max_tokens, paths[name]
    assert data.failures() == [] and data.cold_noise() == []
    records = [r for r in run.records() if r.labels.get("path") not in ("load-other", "evict")]
    assert records and all(r.logprobs and len(r.logprobs) == SPEC.max_tokens for r in records)
    assert all(len(r.logprobs[0].top) == SPEC.top_logprobs for r in records if r.logprobs)
    # The drift per position, from the records: a line a path, over every compared token, whose largest is
    # the path's own logprob drift; the report draws it.
    drifts = drift_by_position(data, list(run.records()))
    for length in data.lengths:
        for p in length.paths:
            assert len(drifts[length.length][p.path]) == p.compared
            assert max(drifts[length.length][p.path]) == pytest.approx(p.max_logprob_diff), p
    section = fidelity_section(RunRead(run, list(run.records()), Manifest(), None))
    assert "![drift per position](fidelity-drift.png)" in "\n".join(section)
    assert (run.path / "fidelity-drift.png").stat().st_size > 0


@pytest.mark.parametrize("alteration", ["token", "drift"])
async def test_an_altered_cached_answer_fails_the_check(
    tiny_server: LlamaServer, pool: UnitPool, tmp_path: Path, alteration: str
) -> None:
    proxy = AlteringProxy(tiny_server.port, alteration)
    url = await proxy.start()
    run = RunDir.create(tmp_path, alteration)
    try:
        data = await fidelity(url, pool, run)
    finally:
        await proxy.close()
    # warm, partial, the two evicting prompts and restored, at each length; never a cold request
    assert proxy.altered == 5 * len(SPEC.lengths)
    cached = [
        (n.length, p) for n in data.lengths for p in n.paths if p.path in ("warm", "partial", "restored")
    ]
    for length, path in cached:
        if alteration == "drift":  # every chosen token 0.5 lower: over the tolerance wherever it is compared
            assert path.verdict in ("drifted", "diverged"), (length, path)
        elif path.verdict == "diverged at a near tie":  # the engine's own flip at a tie, before token 2
            assert path.first_divergence is not None and path.first_divergence < 2, (length, path)
        else:  # the proxy's token, never ranked by the cold answer, from token 2 on
            assert (path.verdict, path.first_divergence) == ("diverged", 2), (length, path)
    failures = data.failures()
    assert failures and len(failures) == sum(not p.holds for _, p in cached), failures
    judgement = FIDELITY.judge(run, random_weights=False)  # what the check says of its own results
    status, reasons = status_of(Facts(judgements=[judgement]), random_weights=False)
    assert status == "failed" and reasons[0].startswith(f"the cache changed the answer: {failures[0]}")
