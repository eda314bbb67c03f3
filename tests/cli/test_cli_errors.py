"""The CLI's one error boundary: a bad or unreachable URL, a missing results directory or run, on every
command that takes them, exits non-zero with `error: ...` or click's usage message on stderr, names the
flag, and never prints a traceback. Real subprocesses of `python -m ctxbench`; the unreachable server is a
loopback port that was just closed (connection refused)."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest
from processes import ctxbench

from ctxbench.errors import EXIT_UNREACHABLE, EXIT_USAGE, UsageError, check_url
from ctxbench.text.arithmetic import write_problems

URL_COMMANDS = ["probe", "capacity", "needle", "ramp", "quality"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def extra_for(command: str, tmp_path: Path) -> list[str]:
    if command == "quality":
        return ["--data", str(write_problems(tmp_path / "test.jsonl", 8)), "--samples", "2", "--fewshot", "1"]
    if command == "needle":
        return ["--lengths", "1K"]
    return []


@pytest.mark.parametrize("command", URL_COMMANDS)
@pytest.mark.parametrize(
    "url", ["127.0.0.1:8080", "ftp://127.0.0.1:8080", "http://127.0.0.1:99999", "http://"]
)
def test_a_malformed_url_is_a_usage_error_naming_the_flag(command: str, url: str, tmp_path: Path) -> None:
    done = ctxbench(
        command,
        "--url",
        url,
        "--model",
        "m",
        "--results",
        str(tmp_path / "r"),
        *extra_for(command, tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert "--url" in done.stderr and "http://HOST:PORT" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("command", URL_COMMANDS)
def test_an_unreachable_server_exits_3_with_one_line_on_stderr(command: str, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    done = ctxbench(
        command,
        "--url",
        url,
        "--model",
        "m",
        "--results",
        str(tmp_path / "r"),
        *extra_for(command, tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode == EXIT_UNREACHABLE, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and "--url" in done.stderr and url in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_debug_shows_the_traceback_of_a_failure(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    done = ctxbench(
        "--debug", "ramp", "--url", url, "--model", "m", "--results", str(tmp_path / "r"), cwd=tmp_path
    )
    assert done.returncode == EXIT_UNREACHABLE and "Traceback" in done.stderr


@pytest.mark.parametrize(
    ("args", "named"), [(["report", "--results"], "--results"), (["audit-cache"], "RESULTS_DIR")]
)
def test_a_results_directory_without_runs_is_a_usage_error(
    args: list[str], named: str, tmp_path: Path
) -> None:
    done = ctxbench(*args, str(tmp_path / "empty"), cwd=tmp_path)
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert f"no runs under {tmp_path / 'empty' / 'runs'} ({named})" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--users", "0"),
        ("--gpus", "0"),
        ("--tflops", "0"),
        ("--efficiency", "1.5"),
        ("--efficiency", "0"),
        ("--decode-tokens-per-s", "0"),
        ("--weights-gb", "-1"),
        ("--context", "0x"),
        ("--gpu-memory", "lots"),
        ("--gpu-memory", "80"),  # 80 what: read as bytes, it planned 0 users, silently
        ("--kv-dtype", "fp3"),
        ("--ramp", "32K:1M"),
        ("--ramp", "1M:32K:3"),  # the ramp model's own message, without pydantic's "Value error, "
        ("--price", "-1"),
    ],
)
def test_plan_refuses_a_bad_value_naming_its_flag(flag: str, value: str, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        '{"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 16, '
        '"num_key_value_heads": 4, "intermediate_size": 2816, "vocab_size": 32000}'
    )
    done = ctxbench("plan", "--config", str(config), flag, value, cwd=tmp_path)
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert flag in done.stderr and "Traceback" not in done.stdout + done.stderr
    assert "Value error" not in done.stderr, done.stderr


def test_plan_names_the_key_a_config_lacks_in_words(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 1024}')
    done = ctxbench("plan", "--config", str(config), "--gpu-memory", "80GB", cwd=tmp_path)
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert "no 'num_hidden_layers' key" in done.stderr and "KeyError" not in done.stderr, done.stderr


def test_check_url_keeps_a_good_url_and_names_where_a_bad_one_came_from() -> None:
    assert check_url(" http://127.0.0.1:8080/ ", "--url") == "http://127.0.0.1:8080"
    with pytest.raises(UsageError, match=r"campaign\.toml:12 urls"):
        check_url("localhost:8080", "campaign.toml:12 urls")
    with pytest.raises(UsageError, match="query"):
        check_url("http://127.0.0.1:8080/?x=1", "--url")


@pytest.mark.parametrize("url", ["127.0.0.1:{port}", "http://127.0.0.1:{port}"])
async def test_the_client_records_a_transport_failure_and_never_raises(url: str) -> None:
    from ctxbench.client.stream import Client

    async with Client(url.format(port=closed_port()), "m") as client:
        record = await client.chat([{"role": "user", "content": "hi"}], max_tokens=4)
    assert record.error is not None and record.error.kind == "connect" and not record.ok


# Each ad-hoc command's flags are checked by the campaign file's model of its check (its params type): a
# value the campaign file refuses, the flag refuses too, before any server is asked, naming the flag.
@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("ramp", "--turns", "0"),
        ("ramp", "--users", "0"),
        ("ramp", "--users", "1,x"),
        ("ramp", "--stagger", "-1"),
        ("ramp", "--schedule", "cubic"),
        ("ramp", "--on-failure", "retry"),
        ("ramp", "--start", "0"),
        ("ramp", "--max-tokens", "0"),
        ("needle", "--lengths", "0"),
        ("needle", "--depths", "1.5"),
        ("needle", "--max-tokens", "0"),
        ("probe", "--concurrency", "0"),
        ("probe", "--max-tokens", "0"),
        ("quality", "--samples", "0"),
        ("quality", "--endpoint", "rest"),
        ("quality", "--fewshot", "-1"),
    ],
)
def test_a_value_the_campaign_file_refuses_is_refused_by_the_flag(
    command: str, flag: str, value: str, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"  # never reached: the flag is refused first
    done = ctxbench(
        command,
        "--url",
        url,
        "--model",
        "m",
        flag,
        value,
        "--results",
        str(tmp_path / "r"),
        *(["--data", str(write_problems(tmp_path / "test.jsonl", 8))] if command == "quality" else []),
        cwd=tmp_path,
    )
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert flag in done.stderr and "Traceback" not in done.stdout + done.stderr


def test_the_ad_hoc_flags_default_to_the_campaign_files_defaults() -> None:
    import typer.main

    from ctxbench.checks.needle import NeedleParams
    from ctxbench.checks.probe import ProbeParams
    from ctxbench.checks.ramp import RampParams
    from ctxbench.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    defaults = {
        name: {p.name: p.default for p in commands[name].params} for name in ("probe", "needle", "ramp")
    }
    ramp, needle, probe = RampParams(), NeedleParams(), ProbeParams()
    assert (
        RampParams(
            start=defaults["ramp"]["start"],
            end=defaults["ramp"]["end"],
            turns=defaults["ramp"]["turns"],
            users=defaults["ramp"]["users"].split(","),
            stagger_s=defaults["ramp"]["stagger_s"],
            max_tokens=defaults["ramp"]["max_tokens"],
            schedule=defaults["ramp"]["schedule"],
            on_failure=defaults["ramp"]["on_failure"],
        )
        == ramp
    )
    assert [float(d) for d in defaults["needle"]["depths"].split(",")] == needle.depths
    assert defaults["needle"]["max_tokens"] == needle.max_tokens
    assert (defaults["probe"]["max_tokens"], defaults["probe"]["concurrency"]) == (
        probe.max_tokens,
        probe.concurrency,
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["run", "{tmp}/missing.toml"], "missing.toml"),
        (["run", "{examples}/demo.toml", "--deployment", "nope", "--dry-run"], "--deployment"),
        (["engine", "build", "llamacpp", "--jobs", "0"], "--jobs"),
        (["engine", "build", "llamacpp", "--sdist", "{tmp}/missing.tar.gz"], "--sdist"),
        (["engine", "build", "llamacpp", "--variant", "rocm"], "--variant"),
        (["engine", "install", "nope"], "nope"),
        (["model", "prepare", "bogus"], "bogus"),
        (["inspect-checkpoint", "{tmp}/missing"], "missing"),
        (
            ["probe", "--url", "http://127.0.0.1:8080", "--model", "m", "--results", "{tmp}/a-file"],
            "--results",
        ),
        (["demo", "--results", "{tmp}/a-file/below"], "--results"),
        (["sample-trace", "{tmp}/t.jsonl", "--block-tokens", "0"], "--block-tokens"),
    ],
)
def test_every_other_command_refuses_a_bad_value_naming_it(
    args: list[str], named: str, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    examples = Path(__file__).parents[2] / "examples"
    done = ctxbench(*(a.format(tmp=tmp_path, examples=examples) for a in args), cwd=tmp_path)
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert named in done.stderr and "Traceback" not in done.stdout + done.stderr


def test_a_server_that_answers_then_breaks_off_is_a_tokenizer_error_not_unreachable() -> None:
    """Only "nothing answered" is ServerUnreachable (exit 3); a server that took the request and hung up is
    up, so counting with its tokenizer failed (TokenizerError names the endpoint)."""
    import threading

    from ctxbench.errors import ServerUnreachable, TokenizerError
    from ctxbench.text.tokens import ServerTokenCounter

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def hang_up() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            connection.recv(65536)
            connection.close()  # the request arrived; no answer

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        with pytest.raises(TokenizerError, match="apply-template") as caught:
            ServerTokenCounter(f"http://127.0.0.1:{listener.getsockname()[1]}", "m", timeout_s=5)
        assert not isinstance(caught.value, ServerUnreachable)
    finally:
        listener.close()
    with pytest.raises(ServerUnreachable):
        ServerTokenCounter(f"http://127.0.0.1:{closed_port()}", "m", timeout_s=5)


ACTORS = """
[campaign]
name = "actors"

[checks.throughput]
levels = [2]
{base}

[[deployments]]
name = "far"
engine = "external"
urls = ["http://127.0.0.1:{port}"]
{override}
"""


@pytest.mark.parametrize(
    ("base", "override", "line"),
    [("ray_actors = 2", "", 7), ("", "[deployments.checks.throughput]\nray_actors = 2", 14)],
)
def test_ray_actors_without_a_cluster_is_refused_before_anything_starts(
    base: str, override: str, line: int, tmp_path: Path
) -> None:
    """The level's users would run on Ray actors: without `--ray` the run stops at once (exit 2, not the
    unreachable server's 3), naming the line that asked for actors, wherever it is set."""
    path = tmp_path / "actors.toml"
    path.write_text(ACTORS.format(base=base, override=override, port=closed_port()))
    done = ctxbench("run", str(path), cwd=tmp_path)
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert f"{path}:{line}:" in done.stderr and "ray_actors = 2 (deployment 'far')" in done.stderr
    assert "--ray ADDRESS" in done.stderr and not (tmp_path / "results").exists()


def test_a_ray_address_where_nothing_listens_is_unreachable_at_once(tmp_path: Path) -> None:
    """Ray would retry such an address for minutes; the run says so in one line, exit 3."""
    pytest.importorskip("ray")
    path = tmp_path / "one.toml"
    path.write_text(ACTORS.format(base="", override="", port=closed_port()))
    done = ctxbench("run", str(path), "--ray", f"127.0.0.1:{closed_port()}", cwd=tmp_path)
    assert done.returncode == EXIT_UNREACHABLE, done.stdout + done.stderr
    assert "nothing accepts connections there" in done.stderr and "Traceback" not in done.stderr


def test_a_ray_address_that_accepts_but_is_no_ray_head_errors_at_the_connect_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something accepts connections but never answers as a Ray head: ray.init alone would retry for
    minutes; our probe ends it at RAY_CONNECT_S (15 s; CTXBENCH_RAY_CONNECT_S, here 2 s so the test does not
    wait out the default), naming the address, the limit and what to check, exit 3. No clock is read here:
    the error states the limit the probe was held to."""
    pytest.importorskip("ray")
    import socket

    monkeypatch.setenv("CTXBENCH_RAY_CONNECT_S", "2")
    path = tmp_path / "one.toml"
    path.write_text(ACTORS.format(base="", override="", port=closed_port()))
    with socket.socket() as silent:  # accepts (the kernel completes the handshake) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        done = ctxbench("run", str(path), "--ray", address, cwd=tmp_path)
    assert done.returncode == EXIT_UNREACHABLE, done.stdout + done.stderr
    assert f"--ray {address}: no Ray cluster answered there within 2 s" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_results_that_are_a_file_are_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    campaign = tmp_path / "c.toml"
    campaign.write_text(
        '[campaign]\nname = "x"\nresults = "afile"\n[checks.probe]\n[[deployments]]\nname = "a"\n'
        f'engine = "external"\nurls = ["http://127.0.0.1:{closed_port()}"]\n'
    )
    flag = ctxbench("run", str(campaign), "--results", "afile", cwd=tmp_path)
    assert flag.returncode == EXIT_USAGE and "afile is a file, not a directory" in flag.stderr, flag.stderr
    key = ctxbench("run", str(campaign), cwd=tmp_path)
    assert key.returncode == EXIT_USAGE, key.stdout + key.stderr
    assert "c.toml: campaign.results: afile is a file" in key.stderr and "requests:" not in key.stdout


def test_sample_trace_refuses_a_directory_or_a_missing_one_naming_its_argument(tmp_path: Path) -> None:
    for out in (str(tmp_path), str(tmp_path / "absent" / "t.jsonl")):
        done = ctxbench("sample-trace", out, cwd=tmp_path)
        assert done.returncode == EXIT_USAGE and "(the trace to write)" in done.stderr, done.stderr
        assert "--results" not in done.stderr


def test_console_lines_wrap_at_words_on_a_terminal_and_stay_whole_when_piped() -> None:
    # Issue 57: long console lines were broken mid-word on a terminal.
    from rich.console import Console

    from ctxbench.cli.common import say

    text = "verdict: PROVISIONAL because the probe check ran alone and the other claims were not checked"
    path = "records: /tmp/a/very/long/path/that/is/longer/than/forty/columns/requests.jsonl"
    terminal = Console(force_terminal=True, width=40, record=True, file=io.StringIO())
    say(text, terminal)
    say(path, terminal)
    lines = terminal.export_text().splitlines()
    assert " ".join(lines[:3]) == text and all(len(line) <= 40 for line in lines[:3]), lines
    assert lines[3:] == ["records:", path.removeprefix("records: ")]  # a path is never cut
    piped = Console(force_terminal=False, width=40, record=True, file=io.StringIO())
    say(text, piped)
    assert piped.export_text().splitlines() == [text]


def test_a_bad_gguf_flag_is_named_in_ctxbenchs_words(tmp_path: Path) -> None:
    # Issue 57: the GGUF library's own wording leaked ("GGUF magic invalid").
    (tmp_path / "x.gguf").write_text("not a gguf")
    url = f"http://127.0.0.1:{closed_port()}"
    cases = (("x.gguf", "x.gguf' is not a GGUF file (it starts with b'not '"), ("none.gguf", "cannot read"))
    for given, said in cases:
        done = ctxbench("capacity", "--url", url, "--model", "m", "--gguf", given, cwd=tmp_path)
        assert said in done.stderr and "magic" not in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
