"""llm-d-benchmark's benchmark report, v0.2 and v0.2.1, as far as ctxbench writes it: pydantic models written
from upstream's own definition, read at the commits in `UPSTREAM` (the same field names, required fields,
discriminator, ranges, enums and unit lists; unknown keys refused wherever upstream refuses them). Fields
ctxbench never fills (time series, observability, component health, multi-modal payloads) are left out:
leaving a field out only makes these models stricter than upstream's, never looser.
tests/unit/test_llmd_upstream.py holds every model here to the digest of upstream's definition in
tests/fixtures/llmd_upstream_shape.json, so drift against upstream shows as a failing test, and every export
of the recorded runs and the demo validates here under both versions.
"""

from __future__ import annotations

import datetime
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# What these models follow: llm-d/llm-d-benchmark, llmdbenchmark/analysis/benchmark_report/.
UPSTREAM = {
    "repository": "llm-d/llm-d-benchmark",
    "0.2": "schema_v0_2.py at 32445ce29634beaedb7c487e10127526f766d128 (base.py at 3b7decff)",
    "0.2.1": "br_v0_2_1_json_schema.json at 3b7decff5fe82e51778b8ba56d6dfb8b440c3109",
}
Version = Literal["0.2", "0.2.1"]
VERSIONS: tuple[Version, ...] = ("0.2", "0.2.1")

Units = Literal[
    "count", "pixels", "percent", "fraction", "ratio", "ms", "s",
    "bytes", "MB", "GB", "TB", "MiB", "GiB", "TiB",
    "Mbit/s", "Gbit/s", "Tbit/s", "GiB/s", "MB/s", "GB/s", "TB/s",
    "ms/token", "s/token", "tokens/s", "queries/s", "images/s", "videos/s", "audios/s", "Watts",
]  # fmt: skip
QUANTITY_UNITS = ("count", "pixels")
TIME_UNITS = ("ms", "s")
GEN_LATENCY_UNITS = ("ms/token", "s/token")
GEN_THROUGHPUT_UNITS = ("tokens/s",)
REQUEST_THROUGHPUT_UNITS = ("queries/s",)


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def _units(self, allowed: tuple[str, ...], *names: str) -> None:
        """Upstream's `check_units`: each named Statistics field, where present, in one unit list."""
        for name in names:
            stat = getattr(self, name)
            if stat is not None and stat.units not in allowed:
                raise ValueError(f"{name}: units {stat.units!r}, must be one of {' '.join(allowed)}")


class Statistics(_Schema):
    units: Units
    mean: float
    mode: float | None = None
    stddev: float | None = Field(None, ge=0)
    min: float | None = None
    p0p1: float | None = None
    p1: float | None = None
    p5: float | None = None
    p10: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p99p9: float | None = None
    max: float | None = None


class AggregateRequests(_Schema):
    total: int = Field(ge=0)
    failures: int | None = Field(None, ge=0)
    incomplete: int | None = Field(None, ge=0)
    input_length: Statistics | None = None
    output_length: Statistics | None = None

    @model_validator(mode="after")
    def _check(self) -> AggregateRequests:
        self._units(QUANTITY_UNITS, "input_length", "output_length")
        return self


class AggregateLatency(_Schema):
    time_to_first_token: Statistics | None = None
    normalized_time_per_output_token: Statistics | None = None
    time_per_output_token: Statistics | None = None
    inter_token_latency: Statistics | None = None
    request_latency: Statistics | None = None

    @model_validator(mode="after")
    def _check(self) -> AggregateLatency:
        self._units(TIME_UNITS, "time_to_first_token", "request_latency")
        latencies = ("normalized_time_per_output_token", "time_per_output_token", "inter_token_latency")
        self._units(GEN_LATENCY_UNITS, *latencies)
        return self


class AggregateThroughput(_Schema):
    input_token_rate: Statistics | None = None
    output_token_rate: Statistics | None = None
    total_token_rate: Statistics | None = None
    request_rate: Statistics | None = None

    @model_validator(mode="after")
    def _check(self) -> AggregateThroughput:
        self._units(GEN_THROUGHPUT_UNITS, "input_token_rate", "output_token_rate", "total_token_rate")
        self._units(REQUEST_THROUGHPUT_UNITS, "request_rate")
        return self


class AggregateRequestPerformance(_Schema):
    requests: AggregateRequests | None = None
    latency: AggregateLatency | None = None
    throughput: AggregateThroughput | None = None


class RequestPerformance(_Schema):
    aggregate: AggregateRequestPerformance | None = None


class SessionRequests(_Schema):
    """v0.2.1's session-level statistics (upstream gives them no unit lists)."""

    total: int = Field(ge=0)
    succeeded: int | None = Field(None, ge=0)
    failed: int | None = Field(None, ge=0)
    total_events: int | None = Field(None, ge=0)
    total_events_completed: int | None = Field(None, ge=0)
    total_events_cancelled: int | None = Field(None, ge=0)
    session_rate: Statistics | None = None
    session_duration: Statistics | None = None
    events_per_session: Statistics | None = None
    events_cancelled_per_session: Statistics | None = None
    input_tokens_per_session: Statistics | None = None
    output_tokens_per_session: Statistics | None = None


class SessionPerformance(_Schema):
    sessions: SessionRequests | None = None


class Results(_Schema):
    request_performance: RequestPerformance | None = None
    profiling: Any | None = None


class ResultsV021(Results):
    session_performance: SessionPerformance | None = None


class SequenceLength(_Schema):
    distribution: Literal["fixed", "gaussian", "uniform", "other"]
    value: int | float = Field(ge=0)
    std_dev: float | None = Field(None, ge=0)
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=1)


class LoadPrefix(_Schema):
    prefix_len: SequenceLength
    num_groups: int = Field(ge=1)
    num_users_per_group: int = Field(ge=1)
    num_prefixes: int = Field(ge=1)


class MultiTurn(_Schema):
    enabled: bool = True
    max_turns: SequenceLength | None = None


class LoadStandardized(_Schema):
    tool: str
    tool_version: str
    parallelism: int = Field(1, ge=1)
    source: Literal["random", "sampled", "unknown"]
    stage: int = Field(0, ge=0)
    input_seq_len: SequenceLength
    output_seq_len: SequenceLength | None = None
    prefix: LoadPrefix | None = None
    multi_turn: MultiTurn | None = None
    rate_qps: float | None = Field(None, gt=0)
    concurrency: int | float | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _whole(self) -> LoadStandardized:
        """Upstream: concurrency is a whole number, or infinite."""
        if isinstance(self.concurrency, float) and not math.isinf(self.concurrency):
            raise ValueError("concurrency must be an integer or .inf")
        return self


class LoadMetadata(_Schema):
    schema_version: str = "0.0.1"
    cfg_id: str | None = None
    description: str | None = None


class Native(_Schema):
    args: dict[str, Any] | None = None
    envars: dict[str, Any] | None = None
    config: Any | None = None


class Load(_Schema):
    metadata: LoadMetadata
    standardized: LoadStandardized
    native: Native


class ComponentMetadata(_Schema):
    schema_version: str = "0.0.1"
    label: str
    cfg_id: str
    description: str | None = None


class Parallelism(_Schema):
    tp: int = Field(1, ge=0)
    dp: int = Field(1, ge=0)
    dp_local: int = Field(1, ge=0)
    workers: int = Field(1, ge=0)
    ep: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)


class Accelerator(_Schema):
    model: str
    count: int = Field(ge=0)
    parallelism: Parallelism


class EngineModel(_Schema):
    name: str


class InferenceEngine(_Schema):
    kind: Literal["inference_engine"] = "inference_engine"
    tool: str
    tool_version: str
    role: Literal["replica", "prefill", "decode"]
    replicas: int = Field(ge=1)
    model: EngineModel
    accelerator: Accelerator


class Generic(BaseModel):
    model_config = ConfigDict(extra="allow")  # upstream's generic component takes any further keys

    kind: Literal["generic"] = "generic"
    tool: str
    tool_version: str


class Component(_Schema):
    metadata: ComponentMetadata
    standardized: Annotated[InferenceEngine | Generic, Field(discriminator="kind")]
    native: Native


class RunTime(_Schema):
    start: datetime.datetime | None = None
    end: datetime.datetime | None = None
    duration: str | None = None  # ISO 8601, "PT12.5S"


class Run(_Schema):
    uid: str
    eid: str | None = None
    cid: str | None = None
    pid: str | None = None
    time: RunTime | None = None
    user: str | None = None
    description: str | None = None
    keywords: list[str] | None = None


class Scenario(_Schema):
    stack: list[Component] | None = None
    load: Load | None = None


class BenchmarkReportV02(_Schema):
    version: Literal["0.2"] = "0.2"
    run: Run
    scenario: Scenario | None = None
    results: Results

    def dump(self) -> dict[str, Any]:
        """As upstream's `BenchmarkReport.dump`: JSON types, unset fields left out."""
        return self.model_dump(mode="json", exclude_none=True)


class BenchmarkReportV021(BenchmarkReportV02):
    version: Literal["0.2.1"] = "0.2.1"  # type: ignore[assignment]  # upstream's subclass narrows it too
    results: ResultsV021


REPORTS: dict[str, type[BenchmarkReportV02]] = {"0.2": BenchmarkReportV02, "0.2.1": BenchmarkReportV021}


def load_report(data: dict[str, Any]) -> BenchmarkReportV02:
    """A report by its `version`, as upstream's `load_benchmark_report` picks the model."""
    version = data.get("version")
    if version not in REPORTS:
        raise ValueError(f"version {version!r}: ctxbench writes llm-d reports {' and '.join(REPORTS)}")
    return REPORTS[str(version)].model_validate(data)
