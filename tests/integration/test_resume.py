"""An interrupted suite keeps what it measured, and a rerun resumes without redoing finished units."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ctxbench.campaigns.suite import run_suite
from ctxbench.checks.capacity import CapacityParams
from ctxbench.checks.catalog import Checks
from ctxbench.checks.needle import NeedleParams
from ctxbench.checks.ramp import RampParams
from ctxbench.checks.ramp.table import read_rows
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServerConfig
from ctxbench.engines.models import TinyModel
from ctxbench.store.run_dir import RunDir
from ctxbench.text.tokens import HfTokenCounter

pytestmark = pytest.mark.engine
SUITE = Checks(
    capacity=CapacityParams(),
    needle=NeedleParams(lengths=[500, 1200], max_tokens=4),
    ramp=RampParams(start=500, end=1200, turns=2, max_tokens=8, users=[1, 2], stagger_s=0.1, ignore_eos=True),
)


class Interrupt(Exception):
    pass


def test_interrupted_suite_resumes_where_it_stopped(
    llama_build: LlamaCppBuild, tiny: TinyModel, tmp_path: Path
) -> None:
    config = LlamaServerConfig(
        binary=llama_build.server, model=tiny.gguf, ctx_size=2 * 2048, parallel=2, alias="tiny"
    )
    counter = HfTokenCounter.from_path(tiny.tokenizer_dir)
    results = tmp_path / "results"
    sent = 0

    def stop_after_four() -> None:  # capacity (2 requests) and two of the six needle prompts
        nonlocal sent
        sent += 1
        if sent == 4:
            raise Interrupt()

    with pytest.raises(Interrupt):
        run_suite(
            config,
            counter,
            SUITE,
            results,
            deployment="tiny",
            campaign="resume",
            on_request_done=stop_after_four,
        )
    (path,) = (results / "runs").iterdir()
    first = RunDir(path)
    assert first.completed_units() == {"capacity"}
    kept = [r.request_id for r in first.records()]
    assert kept[:2] == ["capacity-near", "capacity-over"] and len(kept) >= 4  # nothing measured was lost

    run = run_suite(config, counter, SUITE, results, deployment="tiny", campaign="resume", resume=path)
    assert run.path == path and run.attempt == 2
    ids = [r.request_id for r in run.records()]
    assert ids.count("capacity-near") == 1  # finished units are not sent again
    trials = json.loads((path / "needle.json").read_text())["trials"]
    assert [t["request_id"] for t in trials] == [
        f"needle-{n}-{d:.2f}-a2" for n in (500, 1200) for d in (0.1, 0.5, 0.9)
    ]
    assert not any(t["cache_hit_suspected"] for t in trials)  # the new attempt drew new documents
    assert run.completed_units() == {"capacity", "needle", "ramp", "ramp-u1", "ramp-u2"}
    assert len(read_rows(results / "ramp1m.csv", run.run_id)) == 2 + 4
    manifest = json.loads((path / "manifest.json").read_text())
    assert [a["attempt"] for a in manifest["attempts"]] == [1, 2]
    # Each attempt says what stamped its arrivals: on Linux, the kernel's receive time of the bytes.
    expected = "kernel" if sys.platform == "linux" else "read"
    assert [a["clock"]["arrivals"] for a in manifest["attempts"]] == [expected, expected]

    forced = run_suite(
        config, counter, SUITE, results, deployment="tiny", campaign="resume", resume=path, force=True
    )
    assert forced.attempt == 3 and [r.request_id for r in forced.records()].count("capacity-near-a3") == 1
    rows = read_rows(results / "ramp1m.csv", run.run_id)
    assert len(rows) == 6 and all(r.request_id.endswith("-a3") for r in rows)  # a forced rerun replaces
