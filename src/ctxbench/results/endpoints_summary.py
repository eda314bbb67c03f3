"""MLPerf Endpoints' `result_summary.json`, one per many-users stage: each closed-loop level as a run of
their `concurrency` load pattern, each Poisson open-loop rate as one of their `poisson` pattern, so a reader
of MLPerf Endpoints results (or their own tooling) can put ctxbench's points beside theirs.

The shape is upstream's `Report` (mlcommons/endpoints `src/inference_endpoint/metrics/report.py`, the struct
`Report.to_json` serializes, `accuracy` dropped) and its series rollup (`_series_to_metric_dict`), read at the
commits in `UPSTREAM`; tests/fixtures/endpoints_upstream_shape.json digests them and
tests/unit/test_endpoints_summary.py holds this module's model to it, and each export to what upstream's
reader (`results_plots.load_run`, `extract_distribution`) takes from `<report dir>/performance/`. Their
definitions, followed here:
- times in integer nanoseconds; `ttft` to the first non-empty fragment of any kind (`metrics.first_text_s`,
  as the run report's MLPerf view), `tpot` ctxbench's TPOT, `latency` issue to the last byte (E2E),
  `output_sequence_lengths` the server's output tokens, `input_sequence_lengths` its prompt tokens;
- percentiles at upstream's grid (`PERCENTILES`) by NumPy's `method="lower"` (an observed value, not
  interpolated: every other ctxbench percentile is `stats.percentile`, linear between ranks; the run
  report's MLPerf view names both), keyed as Python writes the float ("99.0");
  `median` the "50.0" one, `std_dev` the sample standard deviation, a histogram over log-spaced edges;
- `qps` completed / duration and `tps` output tokens / duration over the stage's window (first send to
  last end: ctxbench's window), `legacy_loadgen_window_duration_ns` null (not the LoadGen window);
- `test_started_at` 0, as upstream writes it ("TODO: surface session_started_ns"); `version` names the
  tool that measured (ctxbench), `git_sha` its commit; `run_config` the load pattern as upstream's
  `LoadPattern` names it, and a `ctxbench` section saying which run, stage and deployment it is.
- `early_stopping_percentiles` in `ttft`, `tpot` and `latency`, right after `percentiles`: LoadGen's
  early-stopping estimate at 99% confidence of each grid percentile from the median up, None where the
  requests are too few (`measure/early_stopping.py`, checked against upstream's own function);
- `finish_reason_counts` by upstream's six reasons, from each request's finish reason.
Not written: accuracy, and constant-rate open-loop rates (upstream has no such load pattern).
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .. import __version__
from ..checks.throughput import THROUGHPUT
from ..measure import early_stopping, metrics
from ..records import RequestRecord
from ..store.run_dir import RunDir
from ..store.run_files import MANIFEST_FILE, Manifest
from .llmd_report import stages

UPSTREAM = {
    "repository": "mlcommons/endpoints",
    "report": "src/inference_endpoint/metrics/report.py@ea3327530376fef63d706f4105612e17c2c80a8d",
    "early_stopping": "src/inference_endpoint/metrics/early_stopping.py"
    "@ea3327530376fef63d706f4105612e17c2c80a8d",
    "percentiles": "src/inference_endpoint/async_utils/services/metrics_aggregator/registry.py"
    "@021c223cd202d56a797d90cd6cc40864ca4ef573",
    "load_pattern": "src/inference_endpoint/config/schema.py (LoadPattern)",
    "reader": "src/inference_endpoint/metrics/results_plots.py@0a328a713ec039c23109594d139a78c2d851e130",
}
# where upstream's reader (`results_plots.load_run(report_dir)`) looks for it under a run's report directory
FILE = Path("performance") / "result_summary.json"
PERCENTILES = (99.9, 99.0, 97.0, 95.0, 90.0, 80.0, 75.0, 50.0, 25.0, 10.0, 5.0, 1.0)
HISTOGRAM_BUCKETS = 10
NS = metrics.NS


class Histogram(BaseModel):
    model_config = ConfigDict(extra="forbid")
    buckets: list[tuple[float, float]]
    counts: list[int]


class Series(BaseModel):
    """One metric's rollup, as `_series_to_metric_dict` shapes it (what upstream's `display` reads); the tail
    latencies carry their early-stopping estimates right after `percentiles`, as upstream places them."""

    model_config = ConfigDict(extra="forbid")
    total: int
    min: int
    max: int
    median: float
    avg: float
    std_dev: float
    percentiles: dict[str, float]
    early_stopping_percentiles: dict[str, float | None] | None = None
    histogram: Histogram


class LoadPattern(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["concurrency", "poisson"]
    target_concurrency: int | None = None
    target_qps: float | None = None


class ResultSummary(BaseModel):
    """`result_summary.json`: upstream's `Report` without `accuracy`."""

    model_config = ConfigDict(extra="forbid")
    version: str
    git_sha: str | None
    test_started_at: int
    n_samples_issued: int
    n_samples_completed: int
    n_samples_failed: int
    duration_ns: int | None
    state: str
    complete: bool
    ttft: dict[str, Any]
    tpot: dict[str, Any]
    latency: dict[str, Any]
    output_sequence_lengths: dict[str, Any]
    input_sequence_lengths: dict[str, Any]
    legacy_loadgen_window_duration_ns: int | None = None
    qps: float | None = None
    tps: float | None = None
    finish_reason_counts: dict[str, int] = {}
    run_config: dict[str, Any] | None = None


# upstream's tracked finish reasons; any other a server sends counts as "other"
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "function_call", "other")


def series(values: Sequence[int], tail: bool = False) -> dict[str, Any]:
    """The rollup of integer samples, {} without any (upstream's empty series); `tail`: a latency, with its
    early-stopping estimates."""
    if not values:
        return {}
    ordered = sorted(values)
    n, total = len(ordered), sum(ordered)
    avg = total / n
    std_dev = math.sqrt(sum((v - avg) ** 2 for v in ordered) / (n - 1)) if n > 1 else 0.0
    percentiles = {str(p): float(ordered[math.floor((n - 1) * p / 100)]) for p in PERCENTILES}
    low = max(float(ordered[0]), 1.0)
    high = max(float(ordered[-1]), low * 10.0)
    step = (math.log(high) - math.log(low)) / HISTOGRAM_BUCKETS
    edges = [math.exp(math.log(low) + i * step) for i in range(HISTOGRAM_BUCKETS + 1)]
    counts = [0] * HISTOGRAM_BUCKETS
    for value in ordered:  # clipped into the edges' range, as upstream does
        index = bisect.bisect_right(edges, min(max(value, edges[0]), edges[-1])) - 1
        counts[min(max(index, 0), HISTOGRAM_BUCKETS - 1)] += 1
    return Series(
        total=total,
        min=ordered[0],
        max=ordered[-1],
        median=percentiles["50.0"],
        avg=avg,
        std_dev=std_dev,
        percentiles=percentiles,
        early_stopping_percentiles=(
            {
                key: None if v is None else float(v)
                for key, v in early_stopping.estimates(ordered, PERCENTILES).items()
            }
            if tail
            else None
        ),
        histogram=Histogram(buckets=list(zip(edges, edges[1:], strict=False)), counts=counts),
    ).model_dump(mode="json", exclude_none=True)


def _ns(values: Sequence[float | None]) -> list[int]:
    return [round(v * NS) for v in values if v is not None]


def summary_of(
    stage: str, records: Sequence[RequestRecord], manifest: Manifest, run_id: str, arrival: str
) -> ResultSummary | None:
    """One many-users stage as `result_summary.json`, or None for a stage upstream has no pattern for."""
    first = records[0].labels
    if first.get("mode") == "open":
        if arrival != "poisson":
            return None
        pattern = LoadPattern(type="poisson", target_qps=float(first["rate"]))
    else:
        pattern = LoadPattern(type="concurrency", target_concurrency=int(first["users"]))
    ok = [r for r in records if r.ok]
    window_ns = max(r.end_ns for r in records) - min(r.sent_ns for r in records)
    lengths = [n.tokens for r in ok if (n := metrics.output_tokens(r)) is not None]
    duration = window_ns / NS if window_ns > 0 else None
    return ResultSummary(
        version=f"ctxbench {__version__}",
        git_sha=manifest.git_revision,
        test_started_at=0,
        n_samples_issued=len(records),
        n_samples_completed=len(ok),
        n_samples_failed=len(records) - len(ok),
        duration_ns=window_ns if window_ns > 0 else None,
        state="complete",
        complete=True,
        ttft=series(_ns([metrics.first_text_s(r) for r in ok]), tail=True),
        tpot=series(_ns([metrics.tpot_s(r) for r in ok]), tail=True),
        latency=series(_ns([metrics.e2e_s(r) for r in ok]), tail=True),
        output_sequence_lengths=series(lengths),
        input_sequence_lengths=series([p for r in ok if (p := metrics.prompt_tokens(r)) is not None]),
        qps=None if duration is None else len(ok) / duration,
        tps=None if duration is None or not lengths else sum(lengths) / duration,
        finish_reason_counts=finish_reasons(ok),
        run_config={
            "load_pattern": pattern.model_dump(exclude_none=True),
            "ctxbench": {"run_id": run_id, "stage": stage, "deployment": manifest.deployment},
        },
    )


def finish_reasons(records: Sequence[RequestRecord]) -> dict[str, int]:
    """How many requests ended for each of upstream's reasons (a reason it does not track is "other"; a
    request whose server named none is not counted, as upstream counts only what it was told)."""
    counts = dict.fromkeys(FINISH_REASONS, 0)
    for record in records:
        if record.finish_reason is not None:
            reason = record.finish_reason if record.finish_reason in counts else "other"
            counts[reason] += 1
    return counts


def export_endpoints(results: Path, out: Path) -> list[Path]:
    """Every run's many-users stages under `results/runs` as
    `out/<run_id>/<stage>/performance/result_summary.json`: each stage a report directory as upstream's reader
    takes one (`results_plots.load_run`); the files written."""
    written = []
    for path in sorted((results / "runs").glob(f"*/{MANIFEST_FILE}")):
        run = RunDir(path.parent)
        manifest = Manifest.load(run.path)
        arrival = str((manifest.check_parameters.get(THROUGHPUT.name) or {}).get("arrival", "poisson"))
        for stage, records in stages(run.records()).items():
            if not stage.startswith((f"{THROUGHPUT.name}-u", f"{THROUGHPUT.name}-r")):  # levels and rates
                continue
            summary = summary_of(stage, records, manifest, run.run_id, arrival)
            if summary is None:
                continue
            target = out / run.run_id / stage / FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
            written.append(target)
    return written
