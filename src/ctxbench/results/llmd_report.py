"""`ctxbench export --format llm-d-report`: every stage of a run as an llm-d benchmark report, v0.2 or v0.2.1
(`llmd_schema.py`, written from upstream's definition at the commits it names), so ctxbench's runs sit beside
vLLM bench, GuideLLM, inference-perf and AIPerf results in llm-d-benchmark's comparisons.

A stage is a set of requests one load produced: a closed-loop level (its measured requests, warm-up left out),
an open-loop rate, a search's repeat of either, a needle length, a ramp's users setting, the capacity check's
near-limit prompt, a trace replay, each other check's requests (`Check.stage`), the probe. Its figures are
computed from its records with ctxbench's own definitions (docs/metrics.md): TTFT, TPOT and end-to-end latency
percentiles over successful requests (every percentile upstream names, NumPy's linear interpolation as
`metrics.percentile`), ITL over single-event gaps as the run report's, token rates over the stage's window
(first send to last end). A closed-loop level's concurrency is its users, an open-loop level's and a trace's
load is their rate; any other stage (a sessions level too) states the most requests it had in flight, measured
from its records. v0.2.1 adds the sessions of a multi-turn stage (its check says which conversation a request
belongs to: `Check.conversation`). What the schema has no field for (recall, the check's verdict, the cache
cliff) stays in ctxbench's own summary; `results.profiling.ctxbench` names the run, check and stage so a
reader can find it."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from .. import __version__
from ..checks.base import StageLoad
from ..checks.catalog import CHECKS_BY_NAME
from ..engines.kinds import find_engine
from ..measure import metrics
from ..measure.telemetry import TELEMETRY_FILE, read_telemetry
from ..records import RequestRecord
from ..store.run_dir import RunDir
from ..store.run_files import MANIFEST_FILE, Manifest
from .llmd_figures import aggregate, peak_in_flight, sessions
from .llmd_schema import (
    REPORTS,
    BenchmarkReportV02,
    Component,
    Load,
    Run,
    Scenario,
    SequenceLength,
    Version,
)

_ATTEMPT = re.compile(r"-a(\d+)$")


def stage_of(record: RequestRecord) -> str | None:
    """The stage a record belongs to, as its check names it (`Check.stage`), or None for one no stage
    reports (warm-up, the over-limit probe, a record of no known check)."""
    check = CHECKS_BY_NAME.get(record.check)
    return None if check is None else check.stage(record.labels)


def stages(records: Iterable[RequestRecord]) -> dict[str, list[RequestRecord]]:
    """Records by stage, stages in the order their first request was sent."""
    out: dict[str, list[RequestRecord]] = {}
    for record in sorted(records, key=lambda r: r.sent_ns):
        stage = stage_of(record)
        if stage is not None:
            out.setdefault(stage, []).append(record)
    return out


def _length(values: Sequence[int]) -> SequenceLength | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    if min(values) == max(values):
        return SequenceLength(distribution="fixed", value=values[0])
    return SequenceLength(
        distribution="other", value=sum(values) / len(values), min=min(values), max=max(values)
    )


def _wall_clock(manifest: Manifest) -> Callable[[RequestRecord, int], dt.datetime | None]:
    """A record's perf_counter stamp as UTC, by its attempt's clock pair in the manifest (None for runs
    recorded before manifests kept one)."""
    clocks = {a.attempt: a.clock for a in manifest.attempts if a.clock}

    def wall(record: RequestRecord, stamp_ns: int) -> dt.datetime | None:
        found = _ATTEMPT.search(record.request_id)
        clock = clocks.get(int(found.group(1)) if found else 1) or next(iter(clocks.values()), None)
        if clock is None:
            return None
        unix_ns = clock["unix_ns"] + stamp_ns - clock["perf_counter_ns"]
        return dt.datetime.fromtimestamp(unix_ns / 1e9, tz=dt.UTC)

    return wall


def _flags(command: Sequence[str]) -> dict[str, Any]:
    """`['server', '--port', '1', '--metrics']` -> {'--port': '1', '--metrics': None}."""
    out: dict[str, Any] = {}
    items = list(command[1:])
    for index, item in enumerate(items):
        if item.startswith("-"):
            value = (
                items[index + 1] if index + 1 < len(items) and not items[index + 1].startswith("-") else None
            )
            out[item] = value
    return out


def model_name(manifest: Manifest) -> str:
    """The model, not the name it was served under: a Hugging Face id as given, a local file or folder by
    its own name (an absolute path names this machine, not the model); the served name only where the
    manifest recorded no model."""
    model = manifest.model or ""
    if model.startswith(("/", "./", "../", "~")):
        return Path(model).name
    return model or str(manifest.engine.served_name or "not recorded")


def _component(run: RunDir, manifest: Manifest) -> Component:
    engine = manifest.engine
    deployment = manifest.campaign_file_deployment or {}
    gpus = manifest.gpus
    telemetry = read_telemetry(run.path / TELEMETRY_FILE)
    names = telemetry.gpu_names() if telemetry else []
    known = find_engine(engine.kind or deployment.get("engine"), engine.name)
    tool = known.tool if known else str(engine.kind or engine.name or "not recorded")
    model = model_name(manifest)
    common = {"tool": tool, "tool_version": str(engine.version or "not reported")}
    if gpus and names:
        standardized: dict[str, Any] = {
            "kind": "inference_engine",
            **common,
            "role": "replica",
            "replicas": max(1, engine.replicas),
            "model": {"name": model},
            "accelerator": {"model": names[0], "count": gpus, "parallelism": {}},
        }
    else:  # no accelerator to name (a CPU run, or none recorded): upstream's generic component
        standardized = {
            "kind": "generic",
            **common,
            "model": model,
            "replicas": max(1, engine.replicas),
            "accelerator": "not recorded" if gpus else "none listed in the deployment (gpus = [])",
        }
    cfg = hashlib.sha256(json.dumps(deployment, sort_keys=True).encode()).hexdigest()[:32]
    return Component.model_validate(
        {
            "metadata": {"label": str(manifest.deployment), "cfg_id": cfg},
            "standardized": standardized,
            "native": {
                "args": _flags(engine.command or []) or None,
                "envars": engine.env or None,
            },
        }
    )


def _load(stage: str, number: int, records: Sequence[RequestRecord], params: dict[str, Any]) -> Load:
    check = records[0].check
    owner = CHECKS_BY_NAME.get(check)
    load = StageLoad() if owner is None else owner.stage_load(params, records)
    planned = [r.planned_tokens for r in records if r.planned_tokens is not None]
    inputs = _length(planned) or _length([metrics.prompt_tokens(r) or 0 for r in records])
    standardized: dict[str, Any] = {
        "tool": "ctxbench",
        "tool_version": __version__,
        # ctxbench's generators write fresh text per request; a user's JSONL is sampled data
        "source": "sampled" if load.sampled else "random",
        "stage": number,
        "input_seq_len": (inputs or SequenceLength(distribution="fixed", value=1)).model_dump(
            exclude_none=True
        ),
    }
    outputs = [None if (n := metrics.output_tokens(r)) is None else n.tokens for r in records if r.ok]
    if outputs and records[0].max_tokens and all(n == records[0].max_tokens for n in outputs):
        # enforced (ignore_eos, or every reply ran to its budget); else the schema's field stays out
        standardized["output_seq_len"] = {"distribution": "fixed", "value": records[0].max_tokens}
    if load.rate_qps is not None:
        standardized["rate_qps"] = load.rate_qps
    elif load.users is not None:
        standardized["concurrency"] = load.users
    else:
        standardized["concurrency"] = max(1, peak_in_flight(records))
    if load.prefix_tokens:  # a prefix every request of the stage shares by design, its users the group's
        standardized["prefix"] = {
            "prefix_len": {"distribution": "fixed", "value": load.prefix_tokens},
            "num_groups": 1,
            "num_users_per_group": load.prefix_users,
            "num_prefixes": 1,
        }
    if load.turns is not None:
        standardized["multi_turn"] = {
            "enabled": True,
            "max_turns": {"distribution": "fixed", "value": load.turns},
        }
    return Load.model_validate(
        {
            "metadata": {"description": f"ctxbench {check} check, stage {stage}"},
            "standardized": standardized,
            "native": {
                "config": {
                    "check": check,
                    "stage": stage,
                    "parameters": params,
                    "peak_in_flight": peak_in_flight(records),
                }
            },
        }
    )


def run_reports(run: RunDir, version: Version = "0.2") -> list[BenchmarkReportV02]:
    """One report per stage of the run, in the order the stages ran, in llm-d's report `version`."""
    manifest = run.manifest()
    wall = _wall_clock(manifest)
    component = _component(run, manifest)
    parameters = manifest.check_parameters
    model = REPORTS[version]
    reports = []
    for number, (stage, records) in enumerate(stages(run.records()).items()):
        check = records[0].check
        start = wall(records[0], min(r.sent_ns for r in records))
        end = wall(records[-1], max(r.end_ns for r in records))
        seconds = (max(r.end_ns for r in records) - min(r.sent_ns for r in records)) / metrics.NS
        results: dict[str, Any] = {
            "request_performance": {"aggregate": aggregate(records)},
            "profiling": {"ctxbench": {"run_id": run.run_id, "check": check, "stage": stage}},
        }
        if version != "0.2":
            results["session_performance"] = sessions(records)
        reports.append(
            model.model_validate(
                {
                    "version": version,
                    "run": Run.model_validate(
                        {
                            "uid": f"{run.run_id}/{stage}",
                            "eid": manifest.campaign or None,
                            "time": {"start": start, "end": end, "duration": f"PT{seconds:.6f}S"},
                        }
                    ),
                    "scenario": Scenario(
                        stack=[component], load=_load(stage, number, records, parameters.get(check) or {})
                    ),
                    "results": results,
                }
            )
        )
    return reports


# llm-d-benchmark's analysis finds reports by this glob (`**/benchmark_report_v0.2,_*.yaml`, the comma is
# theirs) and reads them with `yaml.safe_load`; a file sorted by name sorts by the stage number written in it.
PREFIX = "benchmark_report_v0.2,_"


def report_file(number: int, stage: str) -> str:
    """`benchmark_report_v0.2,_stage_000_throughput-u1.yaml`: the name llm-d's analysis looks for, with the
    stage's place in load order zero-padded: a sort by name is load order (u1, u4, u16; not u1, u16, u4)."""
    return f"{PREFIX}stage_{number:03d}_{stage}.yaml"


def read_export(path: Path) -> dict[str, Any]:
    """An exported report, read as llm-d's analysis reads it."""
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not an llm-d report (a YAML mapping)")
    return data


def export_llmd(results: Path, out: Path, version: Version = "0.2") -> list[Path]:
    """Every run's stages under `results/runs` as `out/<run_id>/<report_file>`, YAML as llm-d writes its own
    (both versions under llm-d's v0.2 name: 0.2.1 is a revision of it, its `version` inside says which); the
    files written."""
    written = []
    for manifest in sorted((results / "runs").glob(f"*/{MANIFEST_FILE}")):
        run = RunDir(manifest.parent)
        for number, report in enumerate(run_reports(run, version)):
            stage = report.run.uid.split("/", 1)[1]
            path = out / run.run_id / report_file(number, stage)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(report.dump(), sort_keys=False, allow_unicode=True))
            written.append(path)
    return written
