"""MLPerf Endpoints' result_summary.json as upstream reads it: ctxbench's model (results/endpoints_summary.py)
held to the digest of upstream's `Report` (tests/fixtures/endpoints_upstream_shape.json, written from
mlcommons/endpoints at the commits it names): every key upstream requires written with upstream's types, no
key upstream lacks, the series rollup its display reads, its percentile grid and method, its load patterns.
Then every recorded run exports, and each closed-loop level's qps and tps are the run's own figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr, create_model

from ctxbench.checks.throughput.file import ThroughputFile
from ctxbench.measure import early_stopping
from ctxbench.results.endpoints_summary import (
    PERCENTILES,
    LoadPattern,
    ResultSummary,
    Series,
    export_endpoints,
    series,
)

SHAPE = json.loads((Path(__file__).parents[1] / "fixtures" / "endpoints_upstream_shape.json").read_text())
RECORDED = Path(__file__).parents[2] / "docs" / "gpu-validation"


def _types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property of a pydantic JSON schema admits."""
    options = schema.get("anyOf", [schema])
    return {o.get("type", "object") for o in options}


def test_the_model_has_upstreams_keys_with_upstreams_types() -> None:
    schema = ResultSummary.model_json_schema()
    upstream = SHAPE["report"]
    assert set(schema["required"]) == set(upstream["required"])
    expected = {**upstream["required"], **upstream["optional"]}
    assert set(schema["properties"]) == set(expected)
    for key, types in expected.items():
        assert _types(schema["properties"][key]) == set(types), key
    assert set(Series.model_fields) == set(SHAPE["series"]["keys"]) | set(SHAPE["series"]["optional_keys"])
    assert set(LoadPattern.model_fields) <= set(SHAPE["load_pattern"]["keys"])
    allowed = LoadPattern.model_json_schema()["properties"]["type"]["enum"]
    assert set(allowed) <= set(SHAPE["load_pattern"]["types"])
    assert [str(p) for p in PERCENTILES] == SHAPE["series"]["percentile_keys"]


def test_a_series_takes_observed_values_at_upstreams_grid() -> None:
    values = list(range(1, 11))  # 10 values: NumPy's "lower" p90 is the 9th, p99.9 the 9th, p50 the 5th
    rollup = series(values)
    assert set(rollup) == set(SHAPE["series"]["keys"])
    assert set(rollup["histogram"]) == set(SHAPE["series"]["histogram_keys"])
    assert rollup["percentiles"]["90.0"] == 9.0 and rollup["percentiles"]["99.9"] == 9.0
    assert rollup["median"] == rollup["percentiles"]["50.0"] == 5.0
    assert rollup["std_dev"] == pytest.approx(math.sqrt(sum((v - 5.5) ** 2 for v in values) / 9))
    assert sum(rollup["histogram"]["counts"]) == len(values) and rollup["total"] == 55
    assert series([]) == SHAPE["series"]["empty"]


def test_every_recorded_run_exports_and_its_levels_keep_their_figures(tmp_path: Path) -> None:
    recorded = [d for d in sorted(RECORDED.iterdir()) if (d / "runs").is_dir()]
    checked = 0
    for results in recorded:
        for path in export_endpoints(results, tmp_path / results.name):
            data = json.loads(path.read_text())
            summary = ResultSummary.model_validate(data)
            assert set(data) == set(SHAPE["report"]["required"]) | set(SHAPE["report"]["optional"])
            upstream_report().model_validate(data)  # decodes as upstream's struct would
            manifest = json.loads((results / "runs" / path.parts[-4] / "manifest.json").read_text())
            assert data["git_sha"] == manifest.get("git_revision")  # the commit, never dropped
            assert set(data["finish_reason_counts"]) == set(SHAPE["report"]["finish_reasons"])
            pattern = LoadPattern.model_validate((summary.run_config or {})["load_pattern"])
            assert path.relative_to(tmp_path / results.name).parts[2:] == Path(SHAPE["reader"]["file"]).parts
            run_id, stage = path.parent.parent.parent.name, path.parent.parent.name
            assert_upstreams_reader_takes_it(data)
            levels = ThroughputFile.load(results / "runs" / run_id)
            assert levels is not None
            if pattern.type == "concurrency" and "-rep" not in stage:
                level = levels.levels[str(pattern.target_concurrency)]
                assert summary.n_samples_issued == level.requests and summary.n_samples_failed == level.failed
                assert summary.qps == pytest.approx(level.requests_per_s)
                assert summary.tps == pytest.approx(level.output_tokens_per_s)
                checked += 1
            for name in ("ttft", "tpot", "latency"):
                rollup = Series.model_validate(getattr(summary, name))
                assert rollup.min <= rollup.median <= rollup.max, (path, name)
                # the early-stopping map right after the percentiles, over the grid from the median up
                keys = list(data[name])
                assert keys[keys.index("percentiles") + 1] == "early_stopping_percentiles"
                assert rollup.early_stopping_percentiles is not None
                assert list(rollup.early_stopping_percentiles) == [
                    k for k in rollup.percentiles if float(k) >= 50
                ]
                for key, bound in rollup.early_stopping_percentiles.items():
                    assert bound is None or bound >= rollup.percentiles[key]  # never below the empirical
    assert checked >= 8  # the H200 many-users runs' levels and the others' throughput levels


def assert_upstreams_reader_takes_it(summary: dict[str, Any]) -> None:
    """What upstream's reader (`results_plots.extract_distribution`) takes from each series: a dict with
    percentiles whose keys read as floats, min, max, median and avg, histogram buckets as (lo, hi) pairs with
    a count each."""
    for key in SHAPE["reader"]["series_read"]:
        block = summary[key]
        assert isinstance(block, dict) and block["percentiles"], key
        assert set(SHAPE["reader"]["block_keys_read"]) <= set(block), key
        percentiles = block["percentiles"]
        assert all(isinstance(float(k), float) and isinstance(v, float) for k, v in percentiles.items())
        buckets, counts = block["histogram"]["buckets"], block["histogram"]["counts"]
        assert len(buckets) == len(counts) and all(len(pair) == 2 and pair[0] <= pair[1] for pair in buckets)
        assert all(isinstance(c, int) for c in counts), key


_JSON = {"string": StrictStr, "integer": StrictInt, "number": StrictInt | StrictFloat, "boolean": StrictBool}


def upstream_report() -> type[BaseModel]:
    """Upstream's `Report` struct rebuilt from the digest: each required key with its types and no default,
    each optional key defaulted, unknown keys ignored (msgspec's default), strict types (msgspec does not
    coerce "1" to 1). A file that decodes here has what `msgspec.json.decode(..., type=Report)` demands."""

    def annotation(types: list[str]) -> Any:
        kinds = [dict[str, Any] if t == "object" else None if t == "null" else _JSON[t] for t in types]
        out = kinds[0] if kinds[0] is not None else type(None)
        for kind in kinds[1:]:
            out = out | (type(None) if kind is None else kind)
        return out

    report = SHAPE["report"]
    fields: dict[str, Any] = {key: (annotation(types), ...) for key, types in report["required"].items()}
    fields |= {key: (annotation(types), None) for key, types in report["optional"].items()}
    return create_model("UpstreamReport", __config__=ConfigDict(extra="ignore"), **fields)


def test_the_upstream_struct_refuses_a_summary_without_what_it_requires(tmp_path: Path) -> None:
    # Issue 68: every result_summary.json failed upstream's decode ("Object missing required field
    # 'input_sequence_lengths'"). The rebuilt struct refuses the same file.
    from pydantic import ValidationError

    written = [
        p for d in sorted(RECORDED.iterdir()) if (d / "runs").is_dir() for p in export_endpoints(d, tmp_path)
    ]
    complete = json.loads(written[0].read_text())
    upstream_report().model_validate(complete)
    missing = {k: v for k, v in complete.items() if k != "input_sequence_lengths"}
    with pytest.raises(ValidationError, match="input_sequence_lengths"):
        upstream_report().model_validate(missing)
    with pytest.raises(ValidationError, match="n_samples_issued"):
        upstream_report().model_validate({**complete, "n_samples_issued": "5"})  # strict, as msgspec


def test_early_stopping_agrees_with_upstreams_own_cases() -> None:
    # mlcommons/endpoints tests/unit/metrics/test_early_stopping.py (the commit in the digest): LoadGen's
    # reference values, the estimate over 0..9999 at p99, and the floor on both sides of 662.
    cases = SHAPE["series"]["early_stopping"]["upstream_cases"]
    for t, p, h in cases["min_passing"]:
        assert early_stopping.min_passing(t, p) == h, (t, p)
    assert [early_stopping.min_passing(t, 0.99) for t in range(6)] == sorted(
        {early_stopping.min_passing(t, 0.99) for t in range(6)}
    )
    values = [float(i) for i in range(10000)]
    assert (
        early_stopping.over_count(10000, 0.99) == 77 and early_stopping.estimate(values, 99.0) == values[-77]
    )
    assert early_stopping.min_passing(1, 0.99) + 1 == 662
    assert early_stopping.estimate([float(i) for i in range(661)], 99.0) is None
    assert early_stopping.estimate(values[:662], 99.0) == values[661]
    assert early_stopping.estimate([], 99.0) is None
    with pytest.raises(ValueError):
        early_stopping.estimate(values, 0.99)  # a fraction where the grid's 99.0 is meant
    # the incomplete beta against closed forms on both of its branches
    assert early_stopping.regularized_beta(3.0, 1.0, 0.2) == pytest.approx(0.2**3, abs=1e-12)
    assert early_stopping.regularized_beta(1.0, 3.0, 0.9) == pytest.approx(1 - 0.1**3, abs=1e-12)


def test_one_level_gives_the_reports_percentile_and_mlperfs_each_by_its_own_definition() -> None:
    # Issue 68: the run report's p99 (linear between ranks, `stats.percentile`) and the export's (NumPy's
    # "lower", as upstream) differ for the same level; each is what its definition says, from the same values.
    from ctxbench.measure import stats

    values = [10, 20, 30, 40, 1000]  # 5 requests: the report's p99 interpolates toward the slowest
    rollup = series(values)
    assert rollup["percentiles"]["99.0"] == 40.0  # "lower": index floor(0.99 * 4) = 3
    assert stats.percentile([float(v) for v in values], 99) == pytest.approx(40 + 0.96 * 960)
    assert rollup["median"] == 30.0 == stats.percentile([float(v) for v in values], 50)
