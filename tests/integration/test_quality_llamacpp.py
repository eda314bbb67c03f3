"""The quality check's plumbing against the real llama-server: generated arithmetic problems with known
answers (the tiny model's answers are noise; what is checked is sampling, bounded concurrency, scoring
and the files), through the CLI (completions) and a campaign (chat)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.checks.quality.data import flexible_answer, strict_answer
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel
from ctxbench.results.evidence import collect
from ctxbench.store.run_dir import RunDir
from ctxbench.text.arithmetic import write_problems

pytestmark = pytest.mark.engine


def lines_of(results: Path) -> list[dict]:
    return [json.loads(line) for line in (results / "quality" / "quality.jsonl").read_text().splitlines()]


def test_quality_command_scores_every_sample_with_bounded_concurrency(
    tiny_server: LlamaServer, tmp_path: Path
) -> None:
    data = write_problems(tmp_path / "test.jsonl", 20)
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxbench",
            "quality",
            "--url",
            tiny_server.base_url,
            "--model",
            "tiny",
            "--data",
            str(data),
            "--samples",
            "6",
            "--fewshot",
            "2",
            "--endpoint",
            "completions",
            "--max-tokens",
            "16",
            "--concurrency",
            "2",
            "--results",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "flexible:" in done.stdout and "Wilson 95%" in done.stdout
    lines = lines_of(results)
    samples = [line for line in lines if line["kind"] == "sample"]
    (summary,) = [line for line in lines if line["kind"] == "summary"]
    assert (
        len(samples) == 6 and summary["n"] + summary["failed"] == 6 and summary["endpoint"] == "completions"
    )
    for sample in samples:
        assert len(sample["prompt_sha256"]) == 64 and sample["fewshot"] == 2
        assert sample["strict"] == strict_answer(sample["answer"]) and sample["flexible"] == flexible_answer(
            sample["answer"]
        )
        assert sample["correct_flexible"] == (sample["flexible"] == sample["target"])
    k = sum(1 for s in samples if s["correct_flexible"])
    assert (
        summary["flexible"]["correct"] == k
        and summary["flexible"]["low"] <= summary["flexible"]["accuracy"] <= 1
    )
    (manifest,) = (results / "runs").glob("*/manifest.json")
    records = list(RunDir(manifest.parent).records())
    events = sorted(
        [(r.sent_ns, 1) for r in records] + [(r.end_ns, -1) for r in records], key=lambda e: (e[0], e[1])
    )
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak <= 2


def test_quality_in_a_campaign_reaches_the_evidence_table(tmp_path: Path, tiny: TinyModel) -> None:
    data = write_problems(tmp_path / "test.jsonl", 12)
    path = tmp_path / "c.toml"
    path.write_text(f"""
[campaign]
name = "q"
results = "{tmp_path / "results"}"
[checks.quality]
data = "{data}"
samples = 4
fewshot = 1
max_tokens = 16
[[deployments]]
name = "tiny"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
random_weights = true
""")
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign)
    assert outcome.status == "done", outcome.error
    (row,) = collect(campaign.campaign.results)
    quality = row.cell("quality")
    assert "n=4 (chat, 1-shot)" in quality.text and quality.source == "quality/quality.jsonl"
