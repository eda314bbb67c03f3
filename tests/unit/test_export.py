"""Exports (results/llmd_report.py, results/summary.py): every recorded H200 run in docs/gpu-validation as
llm-d benchmark reports v0.2 that validate against the schema's fields and types and have the shape of llm-d's
example report, whose figures are the run's own; a count not reported is left out; ctxbench's own summary
loads back equal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from built_records import request
from cli_main import run_main
from pydantic import ValidationError

from ctxbench.results.columns import COLUMNS
from ctxbench.results.evidence import collect
from ctxbench.results.llmd_figures import aggregate
from ctxbench.results.llmd_report import export_llmd, read_export
from ctxbench.results.llmd_schema import BenchmarkReportV02, Run, Statistics
from ctxbench.results.summary import Summary, summarize

RECORDED = Path(__file__).parents[2] / "docs" / "gpu-validation"
CAMPAIGNS = ("h200-1m", "h200-many-users", "h200-run1", "h200-run2")
AGGREGATE = "results.request_performance.aggregate."

# Key paths of llm-d-benchmark's br_v0_2_example.yaml that every ctxbench report fills, with the example's
# JSON types (numbers may be int or float there too).
EXAMPLE_SHAPE: dict[str, type | tuple[type, ...]] = {
    "version": str,
    "run.uid": str,
    "run.eid": str,
    "run.time.duration": str,
    "scenario.stack.0.standardized.kind": str,
    "scenario.stack.0.standardized.replicas": int,
    "scenario.stack.0.metadata.schema_version": str,
    "scenario.stack.0.metadata.label": str,
    "scenario.stack.0.metadata.cfg_id": str,
    "scenario.stack.0.standardized.tool": str,
    "scenario.stack.0.standardized.tool_version": str,
    "scenario.stack.0.native.args": dict,
    "scenario.load.metadata.schema_version": str,
    "scenario.load.metadata.description": str,
    "scenario.load.standardized.tool": str,
    "scenario.load.standardized.tool_version": str,
    "scenario.load.standardized.stage": int,
    "scenario.load.standardized.source": str,
    "scenario.load.standardized.input_seq_len.distribution": str,
    "scenario.load.standardized.input_seq_len.value": (int, float),
    "scenario.load.native.config": dict,
    AGGREGATE + "requests.total": int,
    AGGREGATE + "requests.failures": int,
    AGGREGATE + "requests.input_length.units": str,
    AGGREGATE + "requests.input_length.mean": (int, float),
    AGGREGATE + "requests.input_length.p99": (int, float),
    AGGREGATE + "requests.output_length.units": str,
    AGGREGATE + "latency.time_to_first_token.units": str,
    AGGREGATE + "latency.time_to_first_token.mean": float,
    AGGREGATE + "latency.time_to_first_token.p50": float,
    AGGREGATE + "latency.time_to_first_token.p99": float,
    AGGREGATE + "latency.request_latency.units": str,
    AGGREGATE + "throughput.output_token_rate.units": str,
    AGGREGATE + "throughput.output_token_rate.mean": float,
    AGGREGATE + "throughput.request_rate.units": str,
    AGGREGATE + "throughput.request_rate.mean": float,
    AGGREGATE + "latency.inter_token_latency.p90": float,
}


def at(data: Any, path: str) -> Any:
    for key in path.split("."):
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    out = tmp_path_factory.mktemp("llmd")
    return {name: export_llmd(RECORDED / name, out / name) for name in CAMPAIGNS}


def test_every_stage_of_every_recorded_run_is_a_report_that_validates(
    exported: dict[str, list[Path]],
) -> None:
    kinds = set()
    for name, files in exported.items():
        assert files, name
        for path in files:
            data = read_export(path)  # YAML, as llm-d's analysis reads it
            assert BenchmarkReportV02.model_validate(data).dump() == data, path  # fields and types
            for key, kind in EXAMPLE_SHAPE.items():
                assert isinstance(at(data, key), kind), (path, key)
            assert data["scenario"]["load"]["standardized"]["tool"] == "ctxbench"
            kinds.add(
                (
                    at(data, "scenario.stack.0.standardized.kind"),
                    str(data["scenario"]["stack"][0]["standardized"].get("accelerator")),
                )
            )
    # the 1M runs recorded their GPU: an inference engine with its accelerator; the others have none to name
    assert any(kind == "inference_engine" and "H200" in accel for kind, accel in kinds), kinds
    stages = {read_export(path)["run"]["uid"].split("/", 1)[1] for path in exported["h200-1m"]}
    assert {"capacity", "needle-1048576", "ramp-u1", "ramp-u2"} <= stages


def test_the_files_are_named_as_llmds_analysis_finds_them_and_sort_in_load_order(
    exported: dict[str, list[Path]],
) -> None:
    # Issue 69: llm-d's analysis looks for `benchmark_report_v0.2,_*.yaml` and found none of ctxbench's
    # `<stage>.json`; renamed, its stages sorted u1, u16, u4, u64.
    for files in exported.values():
        assert files and all(path.match("benchmark_report_v0.2,_*.yaml") for path in files)
    levels = [p for p in exported["h200-many-users"] if "throughput-u" in p.name]
    by_run: dict[str, list[Path]] = {}
    for path in levels:
        by_run.setdefault(path.parent.name, []).append(path)
    for paths in by_run.values():
        users = [int(read_export(p)["run"]["uid"].rsplit("-u", 1)[1]) for p in sorted(paths)]
        assert users == sorted(users) and len(users) > 2, users  # a sort by name is load order


def test_the_reports_figures_are_the_runs_own(exported: dict[str, list[Path]]) -> None:
    for path in exported["h200-many-users"]:
        data = read_export(path)
        users = data["run"]["uid"].split("/", 1)[1].removeprefix("throughput-u")
        level = json.loads(
            (RECORDED / "h200-many-users" / "runs" / path.parent.name / "throughput.json").read_text()
        )["levels"][users]
        figures = at(data, AGGREGATE.rstrip("."))
        assert figures["requests"]["total"] == level["requests"]
        assert figures["requests"]["failures"] == level["failed"]
        assert figures["latency"]["time_to_first_token"]["p99"] == pytest.approx(level["ttft_s"]["p99"])
        assert figures["latency"]["time_to_first_token"]["p50"] == pytest.approx(level["ttft_s"]["p50"])
        assert figures["throughput"]["output_token_rate"]["mean"] == pytest.approx(
            level["output_tokens_per_s"]
        )
        assert figures["throughput"]["request_rate"]["mean"] == pytest.approx(level["requests_per_s"])
        assert data["scenario"]["load"]["standardized"]["concurrency"] == int(users)


def test_a_count_the_server_did_not_report_is_left_out_never_zero() -> None:
    unreported = [
        request("a", 0.0, 1.0, tokens=2, usage=False),
        request("b", 0.5, 1.5, tokens=2, usage=False),
    ]
    figures = BenchmarkReportV02.model_validate(
        {"run": {"uid": "u"}, "results": {"request_performance": {"aggregate": aggregate(unreported)}}}
    ).dump()["results"]["request_performance"]["aggregate"]
    assert "input_length" not in figures["requests"]  # no usage: the prompt's count was not reported
    assert "input_token_rate" not in figures["throughput"] and "total_token_rate" not in figures["throughput"]
    assert figures["throughput"]["request_rate"]["mean"] == pytest.approx(2 / 1.5)


def test_the_schema_refuses_what_llmds_refuses() -> None:
    with pytest.raises(ValidationError):
        Statistics.model_validate({"units": "s"})  # mean is required
    with pytest.raises(ValidationError, match="time_to_first_token"):
        BenchmarkReportV02.model_validate(
            {
                "run": {"uid": "u"},
                "results": {
                    "request_performance": {
                        "aggregate": {"latency": {"time_to_first_token": {"units": "tokens/s", "mean": 1.0}}}
                    }
                },
            }
        )
    with pytest.raises(ValidationError):
        Run.model_validate({"pid": "x"})  # the uid is required
    with pytest.raises(ValidationError):
        Run.model_validate({"uid": "u", "stage": 1})  # a key upstream's Run has not
    with pytest.raises(ValidationError):
        BenchmarkReportV02.model_validate({"version": "0.1", "run": {"uid": "u"}, "results": {}})


def test_the_summary_loads_back_equal_and_says_what_the_table_says(tmp_path: Path) -> None:
    results = RECORDED / "h200-1m"
    summary = summarize(results)
    path = tmp_path / "summary.json"
    summary.save(path)
    assert Summary.load(path) == summary
    rows = collect(results)
    assert [r.run_id for r in summary.runs] == [row.run_id for row in rows]
    for run, row in zip(summary.runs, rows, strict=True):
        assert run.status == row.status and run.reasons == row.reasons
        assert set(run.cells) == {key for key, _ in COLUMNS[2:]}
        assert all(run.cells[key].text == row.cell(key).text for key in run.cells)
    assert json.loads(path.read_text())["summary_version"] == 1


def test_the_export_command_writes_both_formats_and_names_a_bad_one(tmp_path: Path) -> None:
    results = str(RECORDED / "h200-run1")
    done = run_main(["export", "--results", results, "--out", str(tmp_path / "new" / "s.json")])
    assert done.exit_code == 0, done.output
    assert Summary.load(tmp_path / "new" / "s.json").runs
    done = run_main(
        ["export", "--results", results, "--format", "llm-d-report", "--out", str(tmp_path / "br")]
    )
    assert done.exit_code == 0 and "v0.2: 5 file(s)" in done.output, done.output
    args = ["export", "--results", results, "--format", "llm-d-report", "--out", str(tmp_path / "b21")]
    done = run_main([*args, "--llmd-version", "0.2.1"])
    assert done.exit_code == 0 and "v0.2.1: 5 file(s)" in done.output, done.output
    written = list((tmp_path / "b21").rglob("benchmark_report_v0.2,_*.yaml"))
    assert len(written) == 5 and all(read_export(f)["version"] == "0.2.1" for f in written)
    many = str(RECORDED / "h200-many-users")
    done = run_main(
        ["export", "--results", many, "--format", "mlperf-endpoints", "--out", str(tmp_path / "ep")]
    )
    assert done.exit_code == 0 and "result_summary.json: 8 file(s)" in done.output, done.output
    bad = run_main([*args, "--llmd-version", "0.3"])
    assert bad.exit_code == 2 and "--llmd-version '0.3'" in bad.output
    bad = run_main(["export", "--results", results, "--format", "csv", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--format 'csv'" in bad.output
    schema = run_main(["export", "--schema"])
    assert json.loads(schema.output)["properties"]["summary_version"]["const"] == 1


def test_every_format_is_one_exporter_and_the_command_names_each(tmp_path: Path) -> None:
    from ctxbench.results.exports import EXPORTERS, FORMATS

    assert set(EXPORTERS) == set(FORMATS) and all(name == e.name for name, e in EXPORTERS.items())
    bad = run_main(["export", "--results", str(RECORDED / "h200-run1"), "--format", "csv", "--out", "x"])
    assert bad.exit_code == 2 and all(name in bad.output for name in FORMATS), bad.output
    missing = run_main(["export", "--results", str(RECORDED / "h200-run1"), "--format", "mlperf-endpoints"])
    assert missing.exit_code == 2 and "--out: give the directory" in missing.output, missing.output
