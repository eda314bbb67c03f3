"""The manifest is one typed model that every reader loads through (run_files.Manifest): what ctxbench
writes today, every recorded run, and older and shorter shapes all load, with defaults for what is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ctxbench.store.run_dir import RunDir
from ctxbench.store.run_files import MANIFEST_FILE, Manifest

RECORDED = sorted((Path(__file__).parents[2] / "docs" / "gpu-validation").glob(f"*/runs/*/{MANIFEST_FILE}"))


def test_every_recorded_manifest_loads_with_its_engine_and_attempts() -> None:
    assert len(RECORDED) >= 8
    for path in RECORDED:
        manifest = Manifest.load(path.parent)
        raw = json.loads(path.read_text())
        assert manifest.deployment == raw["deployment"] and manifest.engine.kind == raw["engine"].get("kind")
        assert [a.attempt for a in manifest.attempts] == [a["attempt"] for a in raw.get("attempts", [])]
        assert manifest.gpus == raw.get("gpus", 0) and manifest.checks == raw["checks"]
    # the first H200 run predates `gpus` and `attempts` in manifests: it loads with their defaults
    assert any("gpus" not in json.loads(path.read_text()) for path in RECORDED)


def test_a_failed_run_without_an_engine_loads_and_says_where_it_died(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r")
    run.write_manifest({"deployment": "d", "failed": {"error": "engine exited", "during": "needle"}})
    manifest = run.manifest()
    assert manifest.manifest_version == 1 and manifest.engine.kind is None and manifest.ended_at is None
    assert manifest.failed is not None and manifest.failed.error == "engine exited"
    assert run.died_during() == "needle"
    assert manifest.model_extra == {}  # nothing unknown was written


def test_fields_a_manifest_does_not_type_are_kept_and_a_wrong_type_is_refused(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "r")
    run.write_manifest({"deployment": "d", "vendor_field": ["c", "d"], "gpus": 2})
    assert run.manifest().model_extra == {"vendor_field": ["c", "d"]}
    with pytest.raises(
        ValidationError, match="gpus"
    ):  # written through the model: refused before it is saved
        run.write_manifest({"deployment": "d", "gpus": "two"})
    (run.path / "manifest.json").write_text('{"deployment": "d", "gpus": "two"}')  # another writer's
    with pytest.raises(ValidationError, match="gpus"):
        run.manifest()
