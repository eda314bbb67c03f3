"""Campaigns against the real llama-server: replicas with routing, failures that do not stop the campaign,
resuming after a SIGKILL, and the `ctxbench run` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxbench.campaigns.campaign import read_state, run_campaign, state_path
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.checks.ramp.table import RAMP_TABLE, read_rows
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel
from ctxbench.results.evidence import collect
from ctxbench.store.run_dir import RunDir

pytestmark = pytest.mark.engine

HEAD = """
[campaign]
name = "{name}"
results = "{results}"
"""


def campaign_file(tmp_path: Path, body: str, name: str = "it") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(HEAD.format(name=name, results=tmp_path / "results") + body)
    return path


def the_run(results: Path, run_id: str | None) -> RunDir:
    assert run_id is not None
    return RunDir(results / "runs" / run_id)


def test_replicas_keep_each_conversation_on_one_replica(tmp_path: Path, tiny: TinyModel) -> None:
    path = campaign_file(
        tmp_path,
        f"""
[checks.capacity]
[checks.ramp]
start = 256
end = 1024
turns = 3
users = [2]
max_tokens = 8
stagger_s = 0.2

[[deployments]]
name = "tiny-x2"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
ctx_size = 2048
replicas = 2
random_weights = true
""",
    )
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign)
    assert outcome.status == "done"
    run = the_run(campaign.campaign.results, outcome.run_id)
    engine = json.loads((run.path / "manifest.json").read_text())["engine"]
    assert (
        engine["replicas"] == 2
        and len(engine["commands"]) == 2
        and len(engine["cold_start_s_by_replica"]) == 2
    )
    assert engine["version"] != "unknown"
    assert (run.path / "server-0.log").exists() and (run.path / "server-1.log").exists()
    ramp = [r for r in run.records() if r.labels.get("check") == "ramp"]
    replica_of: dict[str, set[str]] = {}
    for record in ramp:
        replica_of.setdefault(record.labels["user"], set()).add(record.labels["replica"])
    assert all(len(replicas) == 1 for replicas in replica_of.values()), replica_of  # sticky
    assert {r for replicas in replica_of.values() for r in replicas} == {"0", "1"}  # and spread
    lines = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert {(line["check"], line["phase"]) for line in lines} >= {("ramp", "before"), ("ramp", "after")}
    after = next(line for line in lines if line["check"] == "ramp" and line["phase"] == "after")
    before = next(line for line in lines if line["check"] == "ramp" and line["phase"] == "before")
    grew = [
        a["common"]["prompt_tokens"] - b["common"]["prompt_tokens"]
        for a, b in zip(after["replicas"], before["replicas"], strict=True)
    ]
    assert len(grew) == 2 and all(g > 0 for g in grew)  # both replicas prefilled their user's turns
    assert "Engine counters per check" in (run.path / "report.md").read_text()


def test_an_engine_that_fails_to_start_fails_its_deployment_and_the_next_runs(
    tmp_path: Path, tiny: TinyModel
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(12))  # the magic passes the run's own check; llama-server refuses it
    path = campaign_file(
        tmp_path,
        f"""
[checks.probe]
document_chars = 0
max_tokens = 4

[[deployments]]
name = "broken"
engine = "llamacpp"
model = "{broken}"
tokenizer = "{tiny.tokenizer_dir}"
ready_timeout_s = 60

[[deployments]]
name = "fine"
engine = "llamacpp"
model = "{tiny.gguf}"
random_weights = true
""",
    )
    campaign = load_campaign(path)
    outcomes = run_campaign(campaign)
    assert [(o.deployment, o.status) for o in outcomes] == [("broken", "failed"), ("fine", "done")]
    assert "exited with code" in (outcomes[0].error or "") and "broken.gguf" in (outcomes[0].error or "")
    failed_run = the_run(campaign.campaign.results, outcomes[0].run_id)
    manifest = json.loads((failed_run.path / "manifest.json").read_text())
    assert "Log tail" in manifest["failed"]["error"]
    rows = {row.deployment: row for row in collect(campaign.campaign.results)}
    assert rows["broken"].status == "failed" and "the deployment failed" in rows["broken"].reasons[0]
    report = (failed_run.path / "report.md").read_text()
    assert "## At a glance: FAILED" in report and "Failed because:\n- the deployment failed: " in report
    assert "**The deployment FAILED**" in report  # and the whole error below, with the log's tail
    again = run_campaign(campaign)  # finished deployments are skipped; the failed one is tried again
    assert [(o.deployment, o.status) for o in again] == [("broken", "failed"), ("fine", "skipped")]


def _kill_processes_with(marker: str) -> int:
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
        except (OSError, ProcessLookupError):
            continue
    return killed


def test_engine_killed_mid_check_marks_the_deployment_failed_and_the_next_runs(
    tmp_path: Path, tiny: TinyModel
) -> None:
    marker = f"doomed-{os.getpid()}"
    path = campaign_file(
        tmp_path,
        f"""
[checks.ramp]
start = 256
end = 1024
turns = 4
users = [1]
max_tokens = 8
on_failure = "continue"

[[deployments]]
name = "doomed"
engine = "llamacpp"
model = "{tiny.gguf}"
served_name = "{marker}"
tokenizer = "{tiny.tokenizer_dir}"
random_weights = true

[[deployments]]
name = "survivor"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
random_weights = true
""",
    )
    campaign = load_campaign(path)
    done = []

    def one_request_done() -> None:
        done.append(1)
        if len(done) == 1:
            assert _kill_processes_with(marker) == 1

    outcomes = run_campaign(campaign, on_request_done=one_request_done)
    assert [(o.deployment, o.status) for o in outcomes] == [("doomed", "failed"), ("survivor", "done")]
    assert "was killed by SIGKILL" in (outcomes[0].error or "") and "Log tail" in (outcomes[0].error or "")
    doomed = the_run(campaign.campaign.results, outcomes[0].run_id)
    assert doomed.died_during() == "ramp"  # the engine's death, not the ramp's verdict
    records = list(doomed.records())
    assert records[0].ok and all(not r.ok for r in records[1:]) and len(records) == 4  # failures are results
    survivor = the_run(campaign.campaign.results, outcomes[1].run_id)
    assert len([r for r in survivor.records() if r.ok]) == 4


RESUMABLE = """
[checks.capacity]
[checks.needle]
lengths = [512, 1024]
depths = [0.2, 0.5, 0.8]
max_tokens = 8
[checks.ramp]
start = 256
end = 1024
turns = 3
users = [1, 2]
max_tokens = 8
stagger_s = 0.2

[[deployments]]
name = "tiny"
engine = "llamacpp"
model = "{gguf}"
tokenizer = "{tokenizer}"
ctx_size = 4096
parallel = 2
random_weights = true
"""


def _final_counts(results: Path) -> dict[str, object]:
    (manifest,) = (results / "runs").glob("*/manifest.json")
    run = RunDir(manifest.parent)
    needle = json.loads((run.path / "needle.json").read_text())
    rows = read_rows(results / RAMP_TABLE, run.run_id)
    return {
        "units": sorted(run.completed_units()),
        "needle_trials": len(needle["trials"]),
        "capacity": (run.path / "capacity.json").exists(),
        "ramp_rows": sorted((r.users, r.user, r.turn) for r in rows),
    }


def test_a_campaign_killed_mid_run_resumes_and_ends_with_the_counts_of_an_uninterrupted_one(
    tmp_path: Path, tiny: TinyModel
) -> None:
    body = RESUMABLE.format(gguf=tiny.gguf, tokenizer=tiny.tokenizer_dir)
    (tmp_path / "whole").mkdir()
    whole = campaign_file(tmp_path / "whole", body)
    run_campaign(load_campaign(whole))
    expected = _final_counts(tmp_path / "whole" / "results")

    (tmp_path / "cut").mkdir()
    cut = campaign_file(tmp_path / "cut", body)
    results = tmp_path / "cut" / "results"
    child = subprocess.Popen(
        [sys.executable, "-m", "ctxbench", "run", str(cut)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lines = sum(len(p.read_text().splitlines()) for p in results.glob("runs/*/requests.jsonl"))
        if lines >= 6:  # inside the needle check
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert read_state(state_path(load_campaign(cut), results))["tiny"]["status"] == "started"
    rerun = subprocess.run(
        [sys.executable, "-m", "ctxbench", "run", str(cut)], capture_output=True, text=True, timeout=600
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "resuming run" in rerun.stdout
    assert _final_counts(results) == expected
    assert read_state(state_path(load_campaign(cut), results))["tiny"]["status"] == "done"


def test_run_command_dry_run_and_deployment_subset(tmp_path: Path, tiny: TinyModel) -> None:
    path = campaign_file(
        tmp_path,
        f"""
[checks.probe]
document_chars = 0
max_tokens = 4

[[deployments]]
name = "one"
engine = "llamacpp"
model = "{tiny.gguf}"
random_weights = true

[[deployments]]
name = "two"
engine = "llamacpp"
model = "{tiny.gguf}"
random_weights = true
""",
    )
    dry = subprocess.run(
        [sys.executable, "-m", "ctxbench", "run", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0 and "--port '{port}'" in dry.stdout and "[two]" in dry.stdout
    assert not (tmp_path / "results").exists()  # nothing started, nothing written
    real = subprocess.run(
        [sys.executable, "-m", "ctxbench", "run", str(path), "--deployment", "two"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert real.returncode == 0, real.stdout + real.stderr
    runs = [
        json.loads(p.read_text())["deployment"] for p in (tmp_path / "results").glob("runs/*/manifest.json")
    ]
    assert runs == ["two"]
    assert (tmp_path / "results" / "report.html").exists()


def test_an_api_key_from_the_environment_is_used_and_never_written(
    tmp_path: Path, tiny: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ctxbench-secret-4242"
    monkeypatch.setenv("CTXBENCH_TEST_KEY", secret)
    path = campaign_file(
        tmp_path,
        f"""
[checks.probe]
document_chars = 0
max_tokens = 4
[checks.capacity]

[[deployments]]
name = "keyed"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
api_key_env = "CTXBENCH_TEST_KEY"
env = {{ HF_TOKEN = "hf-another-secret-99" }}
random_weights = true
""",
    )
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign)
    assert outcome.status == "done", outcome.error
    run = the_run(campaign.campaign.results, outcome.run_id)
    records = list(run.records())
    assert len(records) == 6 and all(r.ok for r in records if "phase" in r.labels)  # probe answered: key sent
    command = json.loads((run.path / "manifest.json").read_text())["engine"]["command"]
    assert command[command.index("--api-key") + 1] == "<redacted>"
    from ctxbench.report.campaign import write_campaign_report

    write_campaign_report(campaign.campaign.results)
    for file in campaign.campaign.results.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert secret.encode() not in data and b"hf-another-secret-99" not in data, file


def test_an_external_deployment_is_measured_where_it_already_runs(
    tmp_path: Path, tiny_server: LlamaServer, tiny: TinyModel
) -> None:
    path = campaign_file(
        tmp_path,
        f"""
[checks.probe]
document_chars = 0
max_tokens = 4
[checks.capacity]

[[deployments]]
name = "already-up"
engine = "external"
urls = ["{tiny_server.base_url}"]
served_name = "tiny"
tokenizer = "{tiny.tokenizer_dir}"
random_weights = true
""",
    )
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign)
    assert outcome.status == "done", outcome.error
    run = the_run(campaign.campaign.results, outcome.run_id)
    engine = json.loads((run.path / "manifest.json").read_text())["engine"]
    assert (
        engine["kind"] == "external"
        and engine["urls"] == [tiny_server.base_url]
        and engine["command"] is None
    )
    assert engine["version"] != "unknown" and engine["cold_start_s"] is None  # llama.cpp's /props build_info
    assert json.loads((run.path / "capacity.json").read_text())["holds"]
    assert tiny_server.alive  # ctxbench did not start it, so it does not stop it


def test_a_shaped_tiny_model_with_depths_for_one_length_and_fixed_replies_runs_with_telemetry(
    tmp_path: Path,
) -> None:
    """The 1M campaign's keys at a small scale (docs/gpu-validation/h200-1m/campaign.toml): a tiny model
    shaped in the file, written on first use; one depth for the longest needle; replies of max_tokens
    exactly; and a telemetry file that says why nothing was sampled on a machine without a GPU."""
    from ctxbench.measure.telemetry import TELEMETRY_FILE, read_telemetry

    path = campaign_file(
        tmp_path,
        """
gpu_telemetry_interval_s = 0.1

[checks.needle]
lengths = ["1K", "2K"]
depths_at = { "2K" = [0.5] }

[checks.ramp]
start = "512"
end = "1K"
turns = 2
users = [1]
max_tokens = 24
ignore_eos = true

[[deployments]]
name = "shaped"
engine = "llamacpp"
model = "ctxbench:tiny"
tiny_model = { n_layer = 1, n_embd = 128, n_head = 2, n_head_kv = 1, n_ff = 256, context_length = "8K" }
ctx_size = 4096
random_weights = true
""",
        name="shaped",
    )
    (outcome,) = run_campaign(load_campaign(path))
    assert outcome.status == "done", outcome.error
    run = the_run(tmp_path / "results", outcome.run_id)
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["model_shape"]["n_layer"] == 1 and manifest["model_shape"]["n_embd"] == 128
    trials = json.loads((run.path / "needle.json").read_text())["trials"]
    assert [(t["length"], t["depth"]) for t in trials] == [(1024, 0.1), (1024, 0.5), (1024, 0.9), (2048, 0.5)]
    ramp = [r for r in run.records() if r.labels["check"] == "ramp"]
    assert len(ramp) == 2 and all(r.usage is not None and r.usage.completion_tokens == 24 for r in ramp)
    telemetry = read_telemetry(run.path / TELEMETRY_FILE)
    assert telemetry is not None and telemetry.headers[0]["interval_s"] == 0.1
    if not os.path.exists("/dev/nvidiactl"):
        assert not telemetry.available and telemetry.reason and telemetry.samples == []
        assert (
            "## GPU telemetry" in (run.path / "report.md").read_text()
            and "Not sampled" in (run.path / "report.md").read_text()
        )


def test_a_level_the_server_refuses_fails_the_run_and_the_command_exits_1(
    tmp_path: Path, tiny: TinyModel
) -> None:
    # Issue 51: a many-users level whose requests the server answered with HTTP 400 gave exit 0 and a
    # PROVISIONAL verdict. Here the user's prompt file holds one prompt far over the 1024-token slot.
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "word " * 3000}) + "\n")
    path = campaign_file(
        tmp_path,
        f"""
[checks.throughput]
levels = [1]
source = "{prompts}"
output_tokens = 4
requests_per_user = 2
warmup_requests = 0

[[deployments]]
name = "tiny"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
ctx_size = 1024
random_weights = true
""",
    )
    ran = subprocess.run(
        [sys.executable, "-m", "ctxbench", "run", str(path)], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    (row,) = collect(tmp_path / "results")
    assert row.status == "failed", row.reasons
    assert row.reasons[0].startswith("2 request(s) refused by the server (throughput 2), first "), row.reasons
    assert "(HTTP 400)" in row.reasons[0] and "refused by the server" in ran.stdout
