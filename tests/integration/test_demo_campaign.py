"""The demo's own campaign (src/ctxbench/campaigns/demo.toml, every check as `make demo` runs them: many-users
levels, open-loop rates scaled from them, then the SLO search over levels already measured) on the tiny
model: one request id is one request, each level is measured once with fresh prompts, and the cache audit
holds every request, and every check's engine counter, to what it declared (issue 51: the search re-sent
levels 1 and 2 with the same ids and prompts, and the cached re-runs became the demo's figures)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.checks.fidelity.file import FidelityFile
from ctxbench.checks.throughput.labels import ThroughputLabels
from ctxbench.engines.models import TinyModel
from ctxbench.measure.metrics import ttft_s
from ctxbench.measure.stats import quantile_bounds
from ctxbench.records import RequestRecord
from ctxbench.render.tables import bounded_text
from ctxbench.results.endpoints_summary import ResultSummary, export_endpoints
from ctxbench.results.llmd_report import run_reports
from ctxbench.results.llmd_schema import VERSIONS, load_report
from ctxbench.store.run_dir import RunDir

pytestmark = pytest.mark.engine


def demo_on_the_tiny_model(tmp_path: Path, tiny: TinyModel) -> Path:
    """The demo's campaign file with its checks as they are, its results here and the tiny model served in
    its deployment's place (same slots)."""
    text = resources.files("ctxbench.campaigns").joinpath("demo.toml").read_text()
    checks, _, deployment = text.partition("[[deployments]]")
    assert (
        'results = "results"' in checks and 'ctx_size = "12K"' in deployment and "parallel = 2" in deployment
    )
    path = tmp_path / "demo.toml"
    path.write_text(
        checks.replace('results = "results"', f'results = "{tmp_path / "results"}"')
        + f"""[[deployments]]
name = "tiny-as-demo"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
ctx_size = "12K"
parallel = 2
random_weights = true
"""
    )
    return path


def test_the_demo_campaign_sends_each_request_once_and_fresh(tmp_path: Path, tiny: TinyModel) -> None:
    (outcome,) = run_campaign(load_campaign(demo_on_the_tiny_model(tmp_path, tiny)))
    assert outcome.status == "done", outcome.error
    run = RunDir(tmp_path / "results" / "runs" / str(outcome.run_id))
    records = list(run.records())
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    data = json.loads((run.path / "throughput.json").read_text())
    probes = [p["level"] for p in data["search"]["probes"]]
    assert probes[:2] == [1, 2], probes  # the search starts at 1 user: levels 1 and 2 read back
    measured = [r for r in records if r.check == "throughput" and not r.warmup]
    for users, level in data["levels"].items():  # each level's figures are its one run: 3 requests a user,
        # then rounds of fresh ones until its median is decided or 24 requests (issue 68)
        closed = [(r, ThroughputLabels.of(r)) for r in measured]
        mine = [r.request_id for r, k in closed if k.users == int(users) and k.rate is None and not k.ask]
        assert sorted(level["request_ids"]) == sorted(mine) and len(mine) == level["requests"], users
        assert len(mine) >= 3 * int(users) and (level["rounds"] == 1) == (len(mine) == 3 * int(users)), users
        assert level["verdict"] in ("met", "broke") or level["stopped_by"] == "max_requests = 24", level
    found = data["search"]
    assert found["met"] is not None, found  # the demo concludes by its intervals, not by estimates
    assert all(p["verdict"] != "broke" or p["breaches"] for p in found["probes"]), found["probes"]
    throughput = [r for r in records if r.labels.get("check") == "throughput"]
    assert throughput and all(r.cache is not None and r.cache.reuse == "fresh" for r in throughput)
    audit = audit_run(run)
    assert audit.findings == (), audit.findings
    declared = [r for r in records if r.ok and r.cache is not None]
    assert (
        audit.audited_requests + audit.unbounded_requests
        == len(declared)
        == len([r for r in records if r.ok])
    )
    judged = {b.check for b in audit.counter_bounds if b.allowed is not None}
    bounded = {"capacity", "needle", "ramp", "throughput", "returning", "sessions", "fidelity"}
    assert judged == bounded, audit.counter_bounds
    fidelity = FidelityFile.load(run.path)
    assert fidelity is not None and fidelity.failures() == [] and fidelity.cold_noise() == [], fidelity
    assert_exports_say_what_ran(run, Path(tiny.gguf).name)
    # MLPerf Endpoints' result_summary.json: one per closed-loop level (the demo's rates are constant, a
    # pattern upstream has none of), each with the level's own request counts
    exported = [
        ResultSummary.model_validate_json(p.read_text())
        for p in export_endpoints(tmp_path / "results", tmp_path / "endpoints")
    ]
    by_users = {
        config["load_pattern"]["target_concurrency"]: s
        for s in exported
        if "-rep" not in (config := s.run_config or {})["ctxbench"]["stage"]
    }
    assert sorted(by_users) == sorted(int(u) for u in data["levels"]), sorted(by_users)
    for users, level in data["levels"].items():
        assert by_users[int(users)].n_samples_completed == level["requests"] - level["failed"], users
    # the many-users levels as MLPerf Endpoints reports them: a point per level, measured from its records
    report = (run.path / "report.md").read_text()
    assert_tables_are_whole(report)
    assert_percentiles_are_bounded(report, data["levels"], records)
    view = report.split("### As MLPerf Endpoints reports it")[1].split("###")[0]
    assert f"Not an MLPerf result: {len(data['levels'])} point(s)" in view
    assert (run.path / "endpoints-pareto.png").stat().st_size > 0 and "endpoints-pareto.png" in view


def assert_percentiles_are_bounded(
    report: str, levels: dict[str, dict], records: list[RequestRecord]
) -> None:
    """Each closed-loop level's TTFT p50 / p90 / p99 in the report with its 95% interval, as the run recorded
    them from the level's requests; 3 requests a user give no p99 an upper end (368 needed)."""
    closed = report.split("### Closed loop")[1].split("###")[0]
    rows = {
        cells[0]: cells
        for line in closed.splitlines()
        if (cells := [c.strip() for c in line.strip().strip("|").split("|")])[0].isdigit()
    }
    assert sorted(rows) == sorted(levels), rows
    for users, level in levels.items():
        stored, mine = level["ttft_s"], set(level["request_ids"])
        ttfts = [t for r in records if r.request_id in mine and r.ok and (t := ttft_s(r)) is not None]
        for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
            assert tuple(stored[f"{key}_ci"]) == quantile_bounds(ttfts, q), (users, key)
        ttft = rows[users][5].split(" / ")
        assert ttft == [bounded_text(stored[q], stored[f"{q}_ci"]) for q in ("p50", "p90", "p99")], users
        assert ttft[2].endswith(", too few]"), ttft  # p99 of 3 x users requests
        assert "too few" not in ttft[0] or level["requests"] < 6, ttft  # p50 has both ends from 6 requests


def assert_exports_say_what_ran(run: RunDir, model: str) -> None:
    """The run's llm-d export, in both versions upstream defines, loads back through the version's model and
    names what ran: llama.cpp, the model file (not its served alias), each stage's load as sent, the ramp's
    and the returning users' conversations as sessions (v0.2.1)."""
    for version in VERSIONS:
        written = run_reports(run, version)
        reports = {r.run.uid.split("/", 1)[1]: json.loads(json.dumps(r.dump())) for r in written}
        assert {"probe", "capacity", "returning", "sessions-s1", "sessions-s2", "fidelity"} <= set(reports), (
            sorted(reports)
        )
        for stage, data in reports.items():
            assert load_report(data).dump() == data and data["version"] == version, stage
            engine = data["scenario"]["stack"][0]["standardized"]
            assert (engine["kind"], engine["tool"], engine["model"]) == ("generic", "llama.cpp", model), stage
            load = data["scenario"]["load"]["standardized"]
            if stage.startswith("throughput-u"):
                assert load["concurrency"] == int(stage.removeprefix("throughput-u")), stage
            if stage.startswith(
                "sessions-s"
            ):  # a level of agent sessions: its sessions share a system prompt
                assert load["prefix"]["num_users_per_group"] == int(stage.removeprefix("sessions-s")), stage
                assert load["multi_turn"]["enabled"] and load["prefix"]["prefix_len"]["value"] == 128, stage
                assert load["concurrency"] == data["scenario"]["load"]["native"]["config"]["peak_in_flight"]
            sessions = data["results"].get("session_performance")
            if version == "0.2.1" and stage.startswith(("ramp-u", "returning", "sessions-s")):
                total = data["results"]["request_performance"]["aggregate"]["requests"]["total"]
                assert sessions["sessions"]["total_events"] <= total, stage
                for multi in ("ramp-u", "sessions-s"):  # every request is a session's turn
                    if stage.startswith(multi):
                        assert sessions["sessions"]["total"] == int(stage.removeprefix(multi)), stage
                        assert sessions["sessions"]["total_events"] == total, stage
            else:
                assert sessions is None, stage
        probe = reports["probe"]["scenario"]["load"]
        assert probe["standardized"]["concurrency"] == probe["native"]["config"]["peak_in_flight"] >= 1


def assert_tables_are_whole(markdown: str) -> None:
    """Every Markdown table has as many cells in each row as in its header (a column added to a header and
    not to its rows shifted the open loop's table)."""
    import re

    table: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            widths = {len(re.split(r"(?<!\\)\|", row.strip())) for row in table}
            assert len(widths) == 1, table[:3]
        table = []
