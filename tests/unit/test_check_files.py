"""Each check's summary file is one model (`check_files`): every recorded run's files load through it and come
back out unchanged, older shapes get their defaults, and a file without the figures readers rely on is refused
by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ctxbench.checks.capacity.file import CapacityFile
from ctxbench.checks.fidelity.file import FidelityFile
from ctxbench.checks.needle.file import NeedleFile
from ctxbench.checks.returning.file import ReturningFile
from ctxbench.checks.throughput.file import ThroughputFile
from ctxbench.checks.trace.file import TraceFile
from ctxbench.store.check_files import CheckFile

MODELS: tuple[type[CheckFile], ...] = (
    CapacityFile,
    NeedleFile,
    ThroughputFile,
    TraceFile,
    ReturningFile,
    FidelityFile,
)
RUNS = sorted(
    p.parent for p in (Path(__file__).parents[2] / "docs" / "gpu-validation").glob("*/runs/*/manifest.json")
)


def test_every_recorded_check_file_loads_and_saves_back_the_same_json(tmp_path: Path) -> None:
    loaded: set[str] = set()
    for run in RUNS:
        for model in MODELS:
            path = model.path_in(run)
            if not path.exists():
                continue
            data = model.load(run)
            assert data is not None
            copy = tmp_path / run.name
            copy.mkdir(exist_ok=True)
            data.save(copy)
            assert json.loads(model.path_in(copy).read_text()) == json.loads(path.read_text()), path
            loaded.add(model.FILE)
    assert {"capacity.json", "needle.json", "throughput.json"} <= loaded


def test_a_run_without_the_file_loads_none(tmp_path: Path) -> None:
    assert all(model.load(tmp_path) is None for model in MODELS)


def test_a_needle_file_from_before_the_control_loads_without_one(tmp_path: Path) -> None:
    trial = {
        "length": 1024, "depth": 0.5, "request_id": "r", "seed": 1, "planned_tokens": 1024,
        "prompt_tokens": 1026, "cached_tokens": None, "ttft_s": 0.2, "found": False, "expected": "1234",
        "answer": "no", "skipped": None, "error": None, "cache_hit_suspected": False,
    }  # fmt: skip
    (tmp_path / NeedleFile.FILE).write_text(
        json.dumps({"recall_by_length": {"1024": {"found": 0, "scored": 1}}, "trials": [trial]})
    )
    needle = NeedleFile.load(tmp_path)
    assert needle is not None and needle.control is None
    assert needle.trials[0].control is False and needle.trials[0].count_error_tokens == 2
    assert needle.recall_sorted()[0][1].missed


def test_a_level_without_its_figures_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="output_tokens_per_s"):
        ThroughputFile.model_validate({"levels": {"2": {"requests": 4, "failed": 0}}})
