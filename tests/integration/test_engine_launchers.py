"""Launchers against real processes: SGLang's command and readiness rule (a stand-in server, since SGLang
does not install on a CPU machine), and stopping the whole process group."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from processes import alive

from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.engines.deployment import Running, plan_deployment

FAKE = Path(__file__).parents[1] / "fixtures" / "fake_sglang"


def test_sglang_launcher_waits_for_health_records_version_and_stops_its_workers(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    path = tmp_path / "c.toml"
    path.write_text(f"""
[campaign]
name = "sgl"
[[deployments]]
name = "sgl"
engine = "sglang"
model = "{model}"
python = "{sys.executable}"
compile_cache = "{tmp_path / "inductor"}"
args = ["--mem-fraction-static", "0.8"]
ready_timeout_s = 30
[deployments.env]
PYTHONPATH = "{FAKE}"
FAKE_SGLANG_ARGV = "{tmp_path / "argv.json"}"
FAKE_SGLANG_WORKER = "{tmp_path / "worker"}"
""")
    (deployment,) = load_campaign(path).deployments
    plan = plan_deployment(deployment)
    with Running(plan, tmp_path / "run") as running:
        described = running.describe()
        seen = json.loads((tmp_path / "argv.json").read_text())
        assert seen["argv"] == plan.specs[0].argv(running.servers[0].port)[3:]
        assert seen["argv"][seen["argv"].index("--model-path") + 1] == str(model)
        assert seen["inductor_cache"] == str(tmp_path / "inductor")
        assert described["cold_start_s"] >= 1.5  # it waited for /health to turn 200, not for the bind
        assert described["version"] == "0.0-fake" and described["name"] == "SGLang"
        assert described["compile_cache_before"]["state"] == "empty"
        from ctxbench.engines.prom import common_metrics

        # SGLang counts every prompt token, cached ones too: `prompt_tokens_all` (report/agreement.py)
        common = {"prompt_tokens": 42.0, "prompt_tokens_all": 42.0, "kv_cache_usage": 0.5}
        assert common_metrics(running.metrics()[0]) == common
        worker = int((tmp_path / "worker").read_text())
        assert alive(worker)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(worker):
        time.sleep(0.05)
    assert not alive(worker), "the engine's worker outlived the stop"
