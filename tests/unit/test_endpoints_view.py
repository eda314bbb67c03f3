"""The MLPerf Endpoints view of the many-users check (checks/throughput/endpoints.py): each closed-loop level
as a Pareto point by the rules' definitions, from the run's own records; the front as MLPerf's step curve."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from built_records import request

from ctxbench.checks.throughput.endpoints import EndpointsPoint, endpoints_points, pareto
from ctxbench.checks.throughput.file import ThroughputFile
from ctxbench.measure import metrics
from ctxbench.records import Chunk
from ctxbench.report.run_report import run_report
from ctxbench.store.run_dir import RunDir

RECORDED = Path(__file__).parents[2] / "docs" / "gpu-validation" / "h200-many-users"


def point(concurrency: int, tpot_ms: float, system_tps: float) -> EndpointsPoint:
    return EndpointsPoint(concurrency, 10, 1.0, system_tps, tpot_ms, None, None)


def test_the_front_keeps_the_points_no_other_beats_on_both_axes() -> None:
    points = [point(1, 2.0, 100), point(2, 2.5, 90), point(4, 4.0, 300), point(8, 10.0, 250)]
    points.append(point(16, 20.0, 400))
    front = pareto(points)
    # 2 users: slower per user than 1 and less in all; 8 users: slower per user than 4 and less in all
    assert [p.concurrency for p in front] == [1, 4, 16]
    assert [p.tps_per_user for p in front] == [500.0, 250.0, 50.0]


def test_ttft_is_to_the_first_non_empty_fragment_and_tps_per_user_is_1000_over_tpot_p90() -> None:
    records = []
    for index in range(10):
        record = request(f"r{index}", index, index + 1.0, labels={"check": "throughput", "users": "1"})
        blank = tuple(Chunk(arrived_ns=c.arrived_ns, text="") for c in record.chunks[:3])  # 3 empty first
        records.append(record.model_copy(update={"chunks": blank + tuple(record.chunks[3:])}))
    data = ThroughputFile.model_validate(
        {
            "levels": {
                "1": {
                    **{k: 0 for k in ("requests", "failed", "output_tokens", "goodput_requests")},
                    "window_s": 10.0,
                    "requests_per_s": 1.0,
                    "output_tokens_per_s": 10.0,
                    "goodput_per_s": 1.0,
                    **{k: {} for k in ("ttft_s", "tpot_s", "decode_rate", "queue_s", "tokens_per_chunk")},
                    "request_ids": [r.request_id for r in records],
                }
            }
        }
    )
    (one,) = endpoints_points(data, records)
    assert one.ttft_token_p90_ms == pytest.approx(100.0)  # the first event, empty as it is
    assert one.ttft_p90_ms == pytest.approx(100.0 + 3 * 100.0)  # the 4th event, the first with text
    tpot = metrics.percentile([metrics.tpot_s(r) or 0 for r in records], 90) or 0
    assert one.tps_per_user == pytest.approx(1 / tpot)
    assert one.system_tps == 10.0 and one.completed == 10


def test_a_recorded_runs_points_are_its_levels_and_the_report_draws_the_front(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RECORDED, results)
    for run_path in sorted((results / "runs").iterdir()):
        run = RunDir(run_path)
        data = ThroughputFile.load(run_path)
        assert data is not None
        records = list(run.records())
        points = endpoints_points(data, records)
        assert [p.concurrency for p in points] == [users for users, _ in data.levels_sorted()]
        for p, (_, level) in zip(points, data.levels_sorted(), strict=True):
            assert p.system_tps == level.output_tokens_per_s and p.completed == level.requests - level.failed
        report = run_report(run)
        assert "### As MLPerf Endpoints reports it" in report and "Not an MLPerf result: 4 point(s)" in report
        assert (run_path / "endpoints-pareto.png").stat().st_size > 0
        assert (run_path / "endpoints-pareto.svg").stat().st_size > 0
