"""The part of llm-d-benchmark's benchmark report v0.2 that ctxbench writes, as pydantic models written from
its definition (llm-d/llm-d-benchmark, `benchmark_report/schema_v0_2.py`, `schema_v0_2_components.py`,
`base.py`): the same field names, required fields, ranges and unit lists, unknown keys refused where that
schema refuses them. An export that validates here has the shape llm-d's tooling loads (tested against the
shape of its `br_v0_2_example.yaml` too). Fields ctxbench never fills (time series, observability samples)
are left out; the schema makes them optional."""

from __future__ import annotations

import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

VERSION: Literal["0.2"] = "0.2"

TIME_UNITS = ("ms", "s")
GEN_LATENCY_UNITS = ("ms/token", "s/token")


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Statistics(_Schema):
    units: Literal["count", "s", "ms", "s/token", "ms/token", "tokens/s", "queries/s"]
    mean: float
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None


class AggregateRequests(_Schema):
    total: int = Field(ge=0)
    failures: int | None = Field(None, ge=0)
    incomplete: int | None = Field(None, ge=0)
    input_length: Statistics | None = None
    output_length: Statistics | None = None


class AggregateLatency(_Schema):
    time_to_first_token: Statistics | None = None
    normalized_time_per_output_token: Statistics | None = None
    time_per_output_token: Statistics | None = None
    inter_token_latency: Statistics | None = None
    request_latency: Statistics | None = None

    @model_validator(mode="after")
    def _units(self) -> AggregateLatency:
        for name in ("time_to_first_token", "request_latency"):
            stat = getattr(self, name)
            if stat is not None and stat.units not in TIME_UNITS:
                raise ValueError(f"{name}: units {stat.units!r}, must be one of {TIME_UNITS}")
        for name in ("normalized_time_per_output_token", "time_per_output_token", "inter_token_latency"):
            stat = getattr(self, name)
            if stat is not None and stat.units not in GEN_LATENCY_UNITS:
                raise ValueError(f"{name}: units {stat.units!r}, must be one of {GEN_LATENCY_UNITS}")
        return self


class AggregateThroughput(_Schema):
    input_token_rate: Statistics | None = None
    output_token_rate: Statistics | None = None
    total_token_rate: Statistics | None = None
    requests_rate: Statistics | None = None

    @model_validator(mode="after")
    def _units(self) -> AggregateThroughput:
        for name in ("input_token_rate", "output_token_rate", "total_token_rate"):
            stat = getattr(self, name)
            if stat is not None and stat.units != "tokens/s":
                raise ValueError(f"{name}: units {stat.units!r}, must be tokens/s")
        if self.requests_rate is not None and self.requests_rate.units != "queries/s":
            raise ValueError(f"requests_rate: units {self.requests_rate.units!r}, must be queries/s")
        return self


class AggregateRequestPerformance(_Schema):
    requests: AggregateRequests | None = None
    latency: AggregateLatency | None = None
    throughput: AggregateThroughput | None = None


class RequestPerformance(_Schema):
    aggregate: AggregateRequestPerformance | None = None


class Results(_Schema):
    request_performance: RequestPerformance | None = None
    observability: dict[str, Any] | None = None
    profiling: Any | None = None


class SequenceLength(_Schema):
    distribution: Literal["fixed", "gaussian", "random", "other"]
    value: int | float = Field(ge=1)
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
    source: Literal["random", "sampled"]
    stage: int = Field(0, ge=0)
    input_seq_len: SequenceLength
    output_seq_len: SequenceLength | None = None
    prefix: LoadPrefix | None = None
    multi_turn: MultiTurn | None = None
    rate_qps: float | None = Field(None, gt=0)
    concurrency: int | None = Field(None, ge=1)


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
    kind: Literal["inference_engine", "generic"]
    schema_version: str = "0.0.1"
    label: str
    cfg_id: str
    description: str | None = None


class Parallelism(_Schema):
    dp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    tp: int = Field(1, ge=1)


class Accelerator(_Schema):
    model: str
    count: int = Field(ge=1)
    parallelism: Parallelism


class EngineModel(_Schema):
    name: str


class InferenceEngine(_Schema):
    tool: str
    tool_version: str
    role: Literal["replica", "prefill", "decode"]
    model: EngineModel
    accelerator: Accelerator


class Generic(BaseModel):
    model_config = ConfigDict(extra="allow")  # the schema's generic component takes any further keys

    tool: str
    tool_version: str


class Component(_Schema):
    metadata: ComponentMetadata
    standardized: InferenceEngine | Generic
    native: Native

    @model_validator(mode="before")
    @classmethod
    def _by_kind(cls, data: Any) -> Any:
        """`metadata.kind` picks the standardized model, as the schema's discriminator does."""
        if isinstance(data, dict) and isinstance(data.get("standardized"), dict):
            kind = (data.get("metadata") or {}).get("kind")
            model = InferenceEngine if kind == "inference_engine" else Generic
            data = {**data, "standardized": model.model_validate(data["standardized"])}
        return data


class RunTime(_Schema):
    start: datetime.datetime | None = None
    end: datetime.datetime | None = None
    duration: str | None = None  # ISO 8601, "PT12.5S"


class Run(_Schema):
    uid: str | None = None
    eid: str | None = None
    cid: str | None = None  # (the example has a `pid` too; the schema's Run refuses it)
    time: RunTime | None = None
    user: str | None = None


class Scenario(_Schema):
    stack: list[Component] | None = None
    load: Load | None = None


class BenchmarkReportV02(_Schema):
    version: Literal["0.2"] = VERSION
    run: Run
    scenario: Scenario | None = None
    results: Results

    def dump(self) -> dict[str, Any]:
        """As llm-d's `BenchmarkReport.dump`: JSON types, unset fields left out."""
        return self.model_dump(mode="json", exclude_none=True)
