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

from ctxbench.checks.throughput.file import ThroughputFile
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
    assert set(Series.model_fields) == set(SHAPE["series"]["keys"])
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
