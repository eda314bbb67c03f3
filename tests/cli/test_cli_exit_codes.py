"""What a script sees at the end of every ad-hoc command against a server that is not a working
OpenAI-compatible one: exit 1 when the requests a check needed failed, the server's HTTP status (or what it
sent instead) named on stderr, the verdict on stdout; 130 with a message on Ctrl-C, the request in flight
recorded as interrupted. Real subprocesses of `python -m ctxbench` against loopback servers
(tests/bad_server.py); refused connections (exit 3) are tested in test_cli_errors.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bad_server import bad_server
from processes import ctxbench

from ctxbench.engines.models import tiny_model
from ctxbench.errors import EXIT_FAILED, EXIT_INTERRUPTED
from ctxbench.text.arithmetic import write_problems

COMMANDS = ["probe", "capacity", "needle", "ramp", "quality"]

NAMED = {
    "404": "HTTP 404: no such route",
    "500": "HTTP 500: upstream model worker crashed",
    "html": "text/html",
}


def arguments(command: str, url: str, tmp_path: Path) -> list[str]:
    common = ["--url", url, "--model", "m", "--results", str(tmp_path / "r")]
    tokenizer = ["--tokenizer", str(tiny_model().tokenizer_dir)]
    extra = {
        "probe": ["--concurrency", "2"],
        "capacity": [*tokenizer, "--limit", "2048"],
        "needle": [*tokenizer, "--limit", "2048", "--lengths", "1K", "--depths", "0.5", "--control", "0"],
        "ramp": [*tokenizer, "--start", "512", "--end", "1K", "--turns", "2", "--users", "1"],
        "quality": ["--data", str(write_problems(tmp_path / "test.jsonl", 8)), "--samples", "2"],
    }[command]
    return (
        [command, *common, *extra, "--fewshot", "1"] if command == "quality" else [command, *common, *extra]
    )


@pytest.mark.parametrize("mode", ["404", "500", "html", "silent"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_whose_requests_failed_exits_1_naming_what_the_server_answered(
    command: str, mode: str, tmp_path: Path
) -> None:
    with bad_server(mode) as url:
        done = ctxbench(*arguments(command, url, tmp_path), cwd=tmp_path)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "Warning" not in done.stderr
    assert done.stderr.startswith("error: ") and "request(s) failed" in done.stderr, done.stderr
    assert NAMED.get(mode, "disconnected") in done.stderr, done.stderr
    assert "verdict: " in done.stdout
    # Issue 57: what failed reads as failed, never as 0/0, and the check that ran never "did not run".
    assert "0/0" not in done.stdout and "check did not run" not in done.stdout, done.stdout
    if command == "needle":
        assert "needle recall: 1024 tokens not scored: 1 of 1 failed (first: " in done.stdout, done.stdout
    if command == "capacity":  # the over-limit prompt was not rejected as over the limit: a failure too
        assert "rejected as it should be" not in done.stdout and "verdict: FAILED" in done.stdout


def test_a_server_without_a_tokenizer_or_a_limit_is_named_with_its_answer(tmp_path: Path) -> None:
    with bad_server("html") as url:
        counted = ctxbench("capacity", "--url", url, "--model", "m", "--results", str(tmp_path), cwd=tmp_path)
        tokenizer = str(tiny_model().tokenizer_dir)
        limited = ctxbench(
            "capacity",
            "--url",
            url,
            "--model",
            "m",
            "--results",
            str(tmp_path),
            "--tokenizer",
            tokenizer,
            cwd=tmp_path,
        )
    assert counted.returncode == EXIT_FAILED and "Traceback" not in counted.stderr
    assert f"{url}/tokenize answered HTTP 200 (text/html)" in counted.stderr
    assert "--tokenizer or --gguf" in counted.stderr
    assert limited.returncode == EXIT_FAILED, limited.stderr
    assert f"{url}/v1/models: HTTP 200 (text/html)" in limited.stderr and "(--limit)" in limited.stderr


def test_a_stream_that_never_ends_is_a_recorded_timeout_after_the_read_timeout(tmp_path: Path) -> None:
    # Issue 57: every token and usage, then no [DONE] and the connection kept open: each request waited the
    # 1,800 s read timeout, which no flag set.
    with bad_server("no_done") as url:
        done = ctxbench(
            "probe",
            "--url",
            url,
            "--model",
            "m",
            "--results",
            str(tmp_path / "r"),
            "--read-timeout",
            "1",
            cwd=tmp_path,
        )
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "request(s) failed, first: timeout" in done.stderr, done.stderr
    (requests,) = (tmp_path / "r" / "runs").glob("*/requests.jsonl")
    records = [json.loads(line) for line in requests.read_text().splitlines()]
    assert records and all(r["error"]["kind"] == "timeout" and len(r["chunks"]) == 3 for r in records)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_exits_130_saying_so_and_records_the_request_in_flight(
    tmp_path: Path, sig: signal.Signals
) -> None:
    # Issue 57: SIGTERM (a scheduler, `kill`) left no record of the request in flight; Ctrl-C did.
    with bad_server("endless") as url:
        # SIGINT as a terminal's Ctrl-C delivers it, to a child that starts with the default handler (a
        # suite started in the background leaves SIGINT ignored, and children inherit that)
        child = subprocess.Popen(
            [sys.executable, "-m", "ctxbench", "probe", "--url", url, "--model", "m"]
            + ["--results", str(tmp_path / "r")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        manifests = tmp_path / "r" / "runs"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(manifests.glob("*/manifest.json")):
            time.sleep(0.05)
        time.sleep(1.0)  # the first request is streaming: the endless server never ends it
        child.send_signal(sig)
        try:
            _, stderr = child.communicate(timeout=60)
        finally:
            child.kill()
    assert child.returncode == EXIT_INTERRUPTED, stderr
    assert stderr.startswith("error: interrupted") and "Traceback" not in stderr, stderr
    (requests,) = manifests.glob("*/requests.jsonl")
    records = [json.loads(line) for line in requests.read_text().splitlines()]
    assert records and records[-1]["error"]["kind"] == "interrupted", records
    assert records[-1]["chunks"], "what streamed before the interrupt is kept"


def test_a_probe_only_campaign_needs_no_tokenizer(tmp_path: Path) -> None:
    # Issue 57: an external deployment with only [checks.probe] against a server without /tokenize failed
    # ("count locally with --tokenizer or --gguf (tokenizer or gguf in a campaign file)"), while
    # `ctxbench probe` on the same server worked. The probe counts nothing: the run asks for no tokenizer.
    with bad_server("no_tokenize") as url:
        campaign = tmp_path / "probe.toml"
        campaign.write_text(
            f'[campaign]\nname = "p"\nresults = "{tmp_path / "results"}"\n[checks.probe]\n'
            f'[[deployments]]\nname = "gateway"\nengine = "external"\nurls = ["{url}"]\nserved_name = "m"\n'
        )
        done = ctxbench("run", str(campaign), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (manifest,) = (tmp_path / "results" / "runs").glob("*/manifest.json")
    assert json.loads(manifest.read_text())["tokenizer"] == "none: no check of this run counts tokens"
    records = [json.loads(line) for line in (manifest.parent / "requests.jsonl").read_text().splitlines()]
    assert records and all(r["error"] is None for r in records)
