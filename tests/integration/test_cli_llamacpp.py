"""The commands a user types, against the real llama-server (tiny model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel

pytestmark = pytest.mark.engine


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
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
    # counted with the server's own /tokenize
    ramp_flags = ("--start", "500", "--end", "1500", "--turns", "2", "--users", "1,2", "--max-tokens", "8")
    out = invoke("ramp", *common, *ramp_flags, "--stagger", "0.1")
    assert "ramp, 2 user(s): recall" in out
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(runs) == 3 and (tmp_path / "ramp1m.csv").exists()
    assert (tmp_path / "report.html").exists() and "tiny" in (tmp_path / "report.md").read_text()
