"""Fixtures that start a real llama-server on 127.0.0.1 (built by `ctxbench engine build llamacpp`).

A missing engine or model fails the tests (it never skips them): `make test` prepares both.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from run_invariants import broken_invariants, run_dirs

from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServer, LlamaServerConfig
from ctxbench.engines.models import TinyModel, demo_model_path, tiny_model

# Ray reads this when it is imported: without it, its nodes and driver take the machine's outward address, and
# the tests stay on loopback (test_ray_cluster.py starts its nodes on 127.0.0.1).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# Every llama-server the tests start (and those `ctxbench` subprocesses start) computes on one thread. With
# its default, a thread per core, each step's threads wait for one another, and on a host whose cores are
# busy (these tests run beside their own client, other servers and, under `make test-stress`, a busy loop
# per core) one descheduled thread holds the others up: the tiny model's 32-token decode went from 7.6 ms
# to 43 ms at the median and 319 ms at p99 (benchmarks/engine_threads.py), and a 2.6 s stall at 2 requests/s
# read as saturation. The tests are of ctxbench, not of llama.cpp's thread pool under contention.
os.environ.setdefault("LLAMA_ARG_THREADS", "1")

TINY_SLOT_CONTEXT = 2048
TINY_SLOTS = 2


@pytest.fixture(scope="session")
def llama_build() -> LlamaCppBuild:
    build = LlamaCppBuild()
    if not build.is_built():
        pytest.fail(
            f"llama-server is not built at {build.server}: run `make test` (or `ctxbench engine build "
            "llamacpp`)."
        )
    return build


@pytest.fixture(scope="session")
def tiny() -> TinyModel:
    return tiny_model()


@pytest.fixture(scope="session")
def tiny_server(
    llama_build: LlamaCppBuild, tiny: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    config = LlamaServerConfig(
        binary=llama_build.server,
        model=tiny.gguf,
        ctx_size=TINY_SLOT_CONTEXT * TINY_SLOTS,
        parallel=TINY_SLOTS,
        alias="tiny",
    )
    with LlamaServer(config, tmp_path_factory.mktemp("tiny-server") / "server.log") as server:
        yield server


@pytest.fixture(scope="session")
def demo_server(
    llama_build: LlamaCppBuild, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    model = demo_model_path()
    if not model.exists():
        pytest.fail(
            f"the demo model is missing at {model}: run `make test` (or `ctxbench model prepare demo`)."
        )
    config = LlamaServerConfig(binary=llama_build.server, model=model, ctx_size=8192, alias="smollm2")
    with LlamaServer(config, tmp_path_factory.mktemp("demo-server") / "server.log") as server:
        yield server


@pytest.fixture(autouse=True)
def run_invariants(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """After each test, every run it wrote under its `tmp_path` holds the run invariants
    (`tests/run_invariants.py`), unless the test breaks them on purpose and says why."""
    yield
    if request.node.get_closest_marker("breaks_run_invariants") is not None:
        return
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and not rep.passed:
        return  # the test's own failure says more
    broken = {run.run_id: b for run in run_dirs(tmp_path) if (b := broken_invariants(run))}
    assert not broken, f"runs of {request.node.name} break the run invariants: {broken}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    rep = yield
    if rep.when == "call":
        item.rep_call = rep  # type: ignore[attr-defined]
    return rep
