"""The commands a user types, against the real llama-server (tiny model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_main import run_main

from ctxbench.checks.needle import NeedleParams
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel
from ctxbench.errors import EXIT_FAILED
from ctxbench.store.run_files import Manifest

pytestmark = pytest.mark.engine


def invoke(*args: str) -> str:
    result = run_main(list(args))
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_capacity_needle_and_ramp_commands_write_runs_and_the_evidence_report(
    tiny_server: LlamaServer, tiny: TinyModel, tmp_path: Path
) -> None:
    common = ["--url", tiny_server.base_url, "--model", "tiny", "--results", str(tmp_path)]
    out = invoke("capacity", *common, "--tokenizer", str(tiny.tokenizer_dir))
    assert "capacity: holds at 2016 of 2048 tokens" in out
    out = invoke("needle", *common, "--gguf", str(tiny.gguf), "--lengths", "1K,3K", "--depths", "0.5")
    assert "needle recall: 1024 tokens" in out and "SKIPPED" in out  # 3K is over the 2K slot
    # the command runs the check the suite runs: its niah.log lines live, its parameters as a campaign's
    (needle_run,) = [p for p in (tmp_path / "runs").iterdir() if p.name.endswith("-needle")]
    for line in (needle_run / "niah.log").read_text().splitlines():
        assert " ".join(line.split()) in out
    recorded = Manifest.load(needle_run).check_parameters["needle"]
    assert NeedleParams.model_validate(recorded) == NeedleParams(lengths=[1024, 3072], depths=[0.5])
    assert recorded["over_limit"] is False  # --force sets it: the one parameter, in the campaign file too
    # counted with the server's own /tokenize
    ramp_flags = ("--start", "500", "--end", "1500", "--turns", "2", "--users", "1,2", "--max-tokens", "8")
    out = invoke("ramp", *common, *ramp_flags, "--stagger", "0.1")
    assert "ramp, 2 user(s): recall" in out
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(runs) == 3 and (tmp_path / "ramp1m.csv").exists()
    assert (tmp_path / "report.html").exists() and "tiny" in (tmp_path / "report.md").read_text()


def test_the_fidelity_command_compares_each_path_with_its_cold_answer(
    tiny_server: LlamaServer, tiny: TinyModel, tmp_path: Path
) -> None:
    common = ["--url", tiny_server.base_url, "--model", "tiny", "--results", str(tmp_path)]
    flags = (
        "--lengths",
        "512",
        "--max-tokens",
        "8",
        "--paths",
        "warm,partial",
        "--tokenizer",
        str(tiny.tokenizer_dir),
    )
    out = invoke("fidelity", *common, *flags)
    assert "fidelity 512 tokens, cold: bitwise identical" in out, out
    assert (
        "fidelity 512 tokens, warm: " in out
        and "fidelity 512 tokens, partial: " in out
        and ", load:" not in out
    )
    assert "cache fidelity" in (tmp_path / "report.md").read_text()


def test_an_engine_that_cannot_load_its_model_is_named_on_the_console_in_its_own_words(
    llama_build: LlamaCppBuild, tmp_path: Path
) -> None:
    """A file with GGUF's magic and nothing after it passes the run's own check; llama-server refuses it,
    and the console (not only the run report) shows the engine's last lines."""
    model = tmp_path / "truncated.gguf"
    model.write_bytes(b"GGUF" + bytes(12))
    path = tmp_path / "c.toml"
    path.write_text(
        f'[campaign]\nname = "broken"\nresults = "{tmp_path / "results"}"\n[checks.probe]\n'
        f'[[deployments]]\nname = "d"\nengine = "llamacpp"\nmodel = "{model}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "ctxbench", "run", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    failed_at = done.stdout.index("d: FAILED: llamacpp exited with code 1 during startup")
    shown = done.stdout[failed_at:].splitlines()
    assert shown[1] == "  the engine's last lines:", done.stdout
    assert any("failed to load model" in line for line in shown[2:8]), done.stdout
    assert "verdict: FAILED" in done.stdout


def test_probe_reads_whole_in_80_columns(tiny_server: LlamaServer, tmp_path: Path) -> None:
    # Issue 57: at 80 columns the probe's table cut its headers to `requ...` and its answers a word a line.
    import os

    done = subprocess.run(
        [sys.executable, "-m", "ctxbench", "probe", "--url", tiny_server.base_url, "--model", "tiny"]
        + ["--results", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    wide = [line for line in lines if len(line) > 80 and str(tmp_path) not in line]  # a path stays whole
    assert lines and not wide, wide
    heads = [line for line in lines if line.startswith(("alone-", "concurrent-"))]
    assert len(heads) == 5 and all(": ok, " in line and " in (" in line for line in heads), heads
    answers = [line for line in lines if line.startswith('  "')]
    assert len(answers) == 5, lines  # each answer on one line, never a word a line
    assert "┃" not in done.stdout and "requ…" not in done.stdout


def test_a_probe_only_campaign_against_llama_server_loads_no_tokenizer(
    tiny_server: LlamaServer, tmp_path: Path
) -> None:
    import json

    campaign = tmp_path / "probe.toml"
    campaign.write_text(
        f'[campaign]\nname = "p"\nresults = "{tmp_path / "results"}"\n[checks.probe]\n[[deployments]]\n'
        f'name = "tiny-external"\nengine = "external"\nurls = ["{tiny_server.base_url}"]\n'
        'served_name = "tiny"\n'
    )
    done = run_main(["run", str(campaign)])
    assert done.exit_code == 0, done.output
    (manifest,) = (tmp_path / "results" / "runs").glob("*/manifest.json")
    assert json.loads(manifest.read_text())["tokenizer"] == "none: no check of this run counts tokens"


def test_every_ad_hoc_command_runs_its_checks_own_run() -> None:
    """One entry point: cli/measure.py names check objects, never a check's `run_*` function."""
    import re

    import ctxbench.cli.measure as measure

    text = Path(measure.__file__).read_text()
    assert re.findall(r"\brun_(?!check\b)\w+", text) == []
