"""The whole suite against the real llama-server, held to its own counters and to the `timings` it returns
with every reply (tests/conformance.py): requests' prompt, computed, cached and generated tokens equal
llama.cpp's `/metrics` over each check, and each record's usage equals its own `timings`."""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance import assert_agrees_with_engine, suite

from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.checks.fidelity.file import FidelityFile
from ctxbench.engines.models import TinyModel
from ctxbench.store.run_dir import RunDir

pytestmark = pytest.mark.engine


def test_whole_suite_agrees_with_llamacpps_counters_and_timings(tmp_path: Path, tiny: TinyModel) -> None:
    path = tmp_path / "conformance.toml"
    path.write_text(
        f"""
[campaign]
name = "conformance"
results = "{tmp_path / "results"}"
"""
        + suite(tmp_path)
        + f"""
[[deployments]]
name = "tiny-llamacpp"
engine = "llamacpp"
model = "{tiny.gguf}"
served_name = "tiny"
ctx_size = 4096
parallel = 2
random_weights = true
"""
    )
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign, on_status=print)
    assert outcome.status == "done", outcome
    run = RunDir(campaign.campaign.results / "runs" / str(outcome.run_id))
    found = assert_agrees_with_engine(run, reports_cached=True, event_per_token=False)
    names = {a.name for a in found}
    # llama.cpp exports no request count or TTFT histogram; it counts the prompt tokens it computed
    assert {"prompt_tokens_computed", "generation_tokens", "cached_tokens"} <= names
    assert "requests" not in names and "prompt_tokens_all" not in names
    mismatched = []
    for record in run.records():
        timings, usage = record.server_timings, record.usage
        if not record.ok or timings is None or usage is None:
            continue
        mine = (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens)
        theirs = (timings["prompt_n"] + timings["cache_n"], timings["cache_n"], timings["predicted_n"])
        if mine != theirs:
            mismatched.append((record.request_id, mine, theirs))
    assert mismatched == []
    # Cache fidelity: llama.cpp is deterministic cold, and its cache gives the same answer.
    fidelity = FidelityFile.load(run.path)
    assert fidelity is not None and fidelity.failures() == [] and fidelity.cold_noise() == [], fidelity
