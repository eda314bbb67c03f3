"""The public API is what the README says it is, and every command has help."""

from __future__ import annotations

import pytest
from cli_main import run_main

import ctxbench

PUBLIC = {
    "Chunk",
    "Client",
    "ContextLimitExceeded",
    "CtxbenchError",
    "EngineBuildError",
    "EngineNotReady",
    "ModelPrepareError",
    "RequestError",
    "RequestFailed",
    "RequestRecord",
    "Timeouts",
    "Usage",
    "__version__",
    "metrics",  # the module of formulas over records, as the README imports it
}


def test_public_names_are_exported() -> None:
    assert set(ctxbench.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(ctxbench, name)


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["engine"],
        ["engine", "build"],
        ["model"],
        ["model", "prepare"],
        ["probe"],
        ["demo"],
        ["report"],
        ["capacity"],
        ["needle"],
        ["ramp"],
        ["plan"],
        ["audit-cache"],
        ["inspect-checkpoint"],
        ["topology"],
        ["run"],
        ["quality"],
        ["sample-trace"],
    ],
)
def test_every_command_has_help(command: list[str]) -> None:
    result = run_main([*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_report_without_runs_says_what_to_do(tmp_path: object) -> None:
    result = run_main(["report", "--results", str(tmp_path)])
    assert result.exit_code == 2 and "ctxbench demo" in result.output


@pytest.mark.parametrize(("text", "tokens"), [("8192", 8192), ("8K", 8192), ("1M", 1048576), ("1.5k", 1536)])
def test_token_counts_accept_k_and_m_suffixes(text: str, tokens: int) -> None:
    from ctxbench.cli import parse_token_count

    assert parse_token_count(text) == tokens


def test_bad_depth_names_the_flag_and_the_range() -> None:
    result = run_main(["needle", "--url", "http://127.0.0.1:9", "--model", "m", "--depths", "0.5,1.5"])
    assert result.exit_code == 2
    # the campaign file's own rule and message (params.NeedleParams), naming the flag and the bad value
    assert (
        "--depths" in result.output and "less than or equal to 1" in result.output and "1.5" in result.output
    )
