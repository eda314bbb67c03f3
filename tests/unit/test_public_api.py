"""The public API is what the README says it is, and every command has help."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import ctxbench
from ctxbench.cli import app

PUBLIC = {
    "Chunk", "Client", "ContextLimitExceeded", "CtxbenchError", "EngineBuildError", "EngineNotReady",
    "ModelPrepareError", "RequestError", "RequestFailed", "RequestRecord", "Timeouts", "Usage", "__version__",
}


def test_public_names_are_exported() -> None:
    assert set(ctxbench.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(ctxbench, name)


@pytest.mark.parametrize(
    "command", [[], ["engine"], ["engine", "build"], ["model"], ["model", "prepare"], ["probe"], ["demo"], ["report"]]
)
def test_every_command_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_report_without_runs_says_what_to_do(tmp_path: object) -> None:
    result = CliRunner().invoke(app, ["report", "--results", str(tmp_path)])
    assert result.exit_code == 1 and "ctxbench demo" in result.output
