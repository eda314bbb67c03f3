"""What a run refuses before any engine starts, and the dry run says the same: a flag ctxbench passes itself
in `args`, a llama.cpp model that is not a GGUF file, a trace's bad line. Real subprocesses of `python -m
ctxbench run`; a refused run leaves no run directory (nothing started). Also: help texts are never read as
markup, and a log (output that is not a terminal) gets whole lines and a progress line on a timer."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest
from processes import ctxbench
from rich.console import Console

from ctxbench.campaigns.campaign import failure_lines
from ctxbench.cli.progress import PlainProgress
from ctxbench.errors import EXIT_OK, EXIT_USAGE, EngineNotReady

GOOD_TRACE = '{"timestamp": 0, "input_length": 100, "output_length": 4, "hash_ids": [1]}\n'


def campaign(tmp_path: Path, deployment: str, trace: str = GOOD_TRACE) -> Path:
    (tmp_path / "trace.jsonl").write_text(trace)
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + bytes(60))  # the magic is all a run checks before it starts
    path = tmp_path / "c.toml"
    path.write_text(
        f"""[campaign]
name = "pre"
results = "{tmp_path / "results"}"

[checks.trace]
file = "{tmp_path / "trace.jsonl"}"

[[deployments]]
name = "d"
{deployment}
"""
    )
    return path


LLAMA = f'engine = "llamacpp"\nmodel = "m.gguf"\nbinary = "{sys.executable}"'


def refused(path: Path, tmp_path: Path, *words: str) -> None:
    """Both the dry run and the run exit 2 naming `words`; the run started nothing."""
    for flags in (["--dry-run"], []):
        done = ctxbench("run", str(path), *flags, cwd=tmp_path)
        assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
        assert all(word in done.stderr for word in words), done.stderr
        assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "results" / "runs").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ('["--port", "9000"]', ("c.toml:", "deployments[0].args", "'--port'", "free port")),
        ('["--host=0.0.0.0"]', ("deployments[0].args", "--host")),
        ('["-c", "4096"]', ("deployments[0].args", "set `ctx_size` instead")),
        ('["--alias", "x"]', ("deployments[0].args", "set `served_name` instead")),
    ],
)
def test_a_flag_ctxbench_passes_itself_is_refused_in_args(
    args: str, words: tuple[str, ...], tmp_path: Path
) -> None:
    refused(campaign(tmp_path, f"{LLAMA}\nargs = {args}"), tmp_path, *words)


def test_vllm_args_may_not_name_the_served_model_but_may_carry_an_api_key(tmp_path: Path) -> None:
    vllm = 'engine = "vllm"\nmodel = "."\nargs = ["--served-model-name", "x"]'
    refused(campaign(tmp_path, vllm), tmp_path, "deployments[0].args", "set `served_name` instead")
    keyed = campaign(tmp_path, 'engine = "vllm"\nmodel = "."\nargs = ["--api-key", "sk-1"]')
    assert ctxbench("run", str(keyed), "--dry-run", cwd=tmp_path).returncode == EXIT_OK


def test_a_llamacpp_model_that_is_not_gguf_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    path = campaign(tmp_path, LLAMA.replace("m.gguf", "notes.gguf"))
    (tmp_path / "notes.gguf").write_text("hello, not a model")
    refused(path, tmp_path, "c.toml:", "deployments[0].model", "not a GGUF file", "b'hell'")
    (tmp_path / "notes.gguf").unlink()
    (tmp_path / "notes.gguf").mkdir()
    refused(path, tmp_path, "deployments[0].model", "is a directory")


def test_a_bad_trace_line_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    path = campaign(tmp_path, LLAMA, trace=GOOD_TRACE + '{"timestamp": 5, "input_length": -1}\n')
    refused(path, tmp_path, "trace.jsonl:2", "input_length")
    dry = ctxbench("run", str(path), "--dry-run", cwd=tmp_path)
    assert "replica 0:" in dry.stdout  # the plan is printed before the refusal


def test_the_dry_run_of_a_campaign_a_run_accepts_says_so_and_names_the_results_given(tmp_path: Path) -> None:
    path = campaign(tmp_path, LLAMA)
    done = ctxbench("run", str(path), "--dry-run", "--results", str(tmp_path / "elsewhere"), cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    assert f"results in {tmp_path / 'elsewhere'}" in done.stdout
    assert "nothing a run checks before it starts is wrong on this machine" in done.stdout


def test_the_dry_run_counts_the_trace_requests_a_slot_cannot_take(tmp_path: Path) -> None:
    # Issue 51: 19 of 40 lines of a real trace slice were over the slot, and the dry run said nothing.
    over = '{"timestamp": 1, "input_length": 9000, "output_length": 4, "hash_ids": [1]}\n'
    path = campaign(tmp_path, LLAMA + "\nctx_size = 8192", trace=GOOD_TRACE + over + over)
    dry = ctxbench("run", str(path), "--dry-run", cwd=tmp_path)
    assert dry.returncode == EXIT_OK, dry.stderr
    assert "2 of 3 trace requests" in dry.stdout and "first at line 2" in dry.stdout
    assert "8192-token slot" in dry.stdout and "1 warning(s) above" in dry.stdout


def test_the_dry_run_counts_the_trace_requests_shorter_than_the_shortest_prompt(tmp_path: Path) -> None:
    # Issue 51: 705 of 3,993 requests of the real synthetic trace were shorter than ctxbench's shortest
    # prompt and were sent longer, silently.
    from ctxbench.engines.models import tiny_model
    from ctxbench.text.blocks import shortest_prompt
    from ctxbench.text.tokens import HfTokenCounter

    tokenizer = tiny_model().tokenizer_dir
    shortest = shortest_prompt(HfTokenCounter.from_path(tokenizer))
    short = '{"timestamp": 1, "input_length": 5, "output_length": 4, "hash_ids": [2]}\n'
    path = campaign(
        tmp_path, LLAMA + f'\ntokenizer = "{tokenizer}"', trace=GOOD_TRACE + short + short + short
    )
    dry = ctxbench("run", str(path), "--dry-run", cwd=tmp_path)
    assert dry.returncode == EXIT_OK, dry.stderr
    assert (
        f"3 of 4 trace requests ({tmp_path / 'trace.jsonl'}, first at line 2) ask for fewer than {shortest}"
        in (" ".join(dry.stdout.split()))
    ), dry.stdout
    assert "1 warning(s) above" in dry.stdout


def test_a_bad_prompt_file_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    path = campaign(tmp_path, LLAMA)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hello"}\n{"text": "no prompt key"}\n')
    path.write_text(
        path.read_text().replace(
            "[checks.trace]",
            f'[checks.throughput]\nlevels = [1]\nsource = "{tmp_path / "prompts.jsonl"}"\n\n[checks.trace]',
        )
    )
    refused(path, tmp_path, "prompts.jsonl:2", '"prompt" string')


def test_the_dry_run_says_what_each_judged_percentile_needs_and_what_a_prompt_file_holds(
    tmp_path: Path,
) -> None:
    # Issue 68: the dry run said nothing of the 368 requests a p99 needs before a level can meet it. Issue 69:
    # nothing of the ShareGPT conversations a run would skip.
    import json

    path = campaign(tmp_path, LLAMA)
    (tmp_path / "sg.json").write_text(
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},
                {"conversations": [{"from": "human", "value": "alone"}]},
            ]
        )
    )
    path.write_text(
        path.read_text().replace(
            "[checks.trace]",
            '[checks.throughput]\nlevels = [1, 2]\nrequests_per_user = 4\nsearch = "users"\n'
            f'source = "{tmp_path / "sg.json"}"\n'
            "slo = { ttft_p99_s = 0.25, tpot_p90_s = 0.05, max_s = 120 }\n\n[checks.trace]",
        )
    )
    dry = ctxbench("run", str(path), "--dry-run", cwd=tmp_path)
    assert dry.returncode == EXIT_OK, dry.stderr
    text = " ".join(dry.stdout.split())
    assert "TTFT p99 <= 0.25 s: a level is shown to meet it from 368 requests" in text, text
    assert "TPOT p90 <= 0.05 s: a level is shown to meet it from 36 requests" in text
    assert "max_requests = 4096 or max_s = 120 s (then it is undetermined, never broken)" in text
    assert "2 listed level(s) and at most 8 search probe(s)" in text and "at most 0.33 h of load" in text
    assert "prompts: 1 from" in text and "(1 ShareGPT conversation(s) skipped" in text


def sessions_campaign(tmp_path: Path, trace_format: str, lines: list[str]) -> Path:
    """A campaign of the sessions check replaying `lines` as a trace of `trace_format`."""
    path = campaign(tmp_path, LLAMA)
    (tmp_path / "s.jsonl").write_text("".join(line + "\n" for line in lines))
    path.write_text(
        path.read_text().replace(
            "[checks.trace]",
            f'[checks.sessions]\ntrace = "{tmp_path / "s.jsonl"}"\ntrace_format = "{trace_format}"\n\n'
            "[checks.trace]",
        )
    )
    return path


FIRST = '{"session": "a", "turn": 1, "timestamp": 0, "input_tokens": 300, "output_tokens": 8}'
USER = '{"conversation_id": "a", "turn": 1, "role": "user", "content": "go"}'


@pytest.mark.parametrize(
    ("trace_format", "lines", "words"),
    [
        # Issue 69: 17 malformed sessions traces passed the dry run; the run started the engine, then failed
        (
            "sessions",
            [FIRST, '{"session": "a", "turn": 2, "gap_s": -1, "input_tokens": 9, "output_tokens": 8}'],
            ("s.jsonl:2", "gap_s is -1"),
        ),
        (
            "sessions",
            [
                FIRST.replace('"timestamp": 0', '"timestamp": 5000'),
                '{"session": "a", "turn": 2, "timestamp": 10, "input_tokens": 9, "output_tokens": 8}',
            ],
            ("s.jsonl:2", "before an earlier turn"),
        ),
        ("sessions", [FIRST, FIRST], ("s.jsonl:2", "turn 1 again")),
        ("sessions", [FIRST.replace("300", "99999999999")], ("s.jsonl:1", "input_tokens is 99999999999")),
        (
            "sessions",
            [FIRST, '{"session": "a", "turn": 2, "gap_s": 1e12, "input_tokens": 9, "output_tokens": 8}'],
            ("s.jsonl:2", "gap_s", "a replay waits at most a day"),
        ),
        ("sessions", ['{"session": "a", "turn": 1, "timestamp": 0}'], ("s.jsonl:1", "input_tokens")),
        ("sessions", ["not json"], ("s.jsonl:1",)),
        (
            "mooncake",
            ['{"timestamp": 0, "input_length": 100, "output_length": 4}'],
            ("s.jsonl:1", "no hash_ids"),
        ),
        (
            "mlperf-agentic",
            [USER, USER.replace('"turn": 1', '"turn": 2')],
            ("s.jsonl:2", "a user row after a user"),
        ),
    ],
)
def test_a_bad_sessions_trace_is_refused_before_the_engine_starts(
    tmp_path: Path, trace_format: str, lines: list[str], words: tuple[str, ...]
) -> None:
    refused(sessions_campaign(tmp_path, trace_format, lines), tmp_path, *words)


@pytest.mark.parametrize(
    ("trace_format", "lines", "where"),
    [
        # the second turn carries the first turn and its reply: 1500 + 8 + 600 prompt tokens, 8 more to reply
        (
            "sessions",
            [
                FIRST.replace("300", "1500"),
                FIRST.replace('"turn": 1, "timestamp": 0', '"turn": 2, "gap_s": 1').replace("300", "600"),
            ],
            "s.jsonl:2",
        ),
        (
            "mooncake",
            [
                GOOD_TRACE.strip(),
                '{"timestamp": 5, "input_length": 3000, "output_length": 4, "hash_ids": [7]}',
            ],
            "s.jsonl:2",
        ),
    ],
)
def test_a_sessions_trace_turn_longer_than_the_slot_is_refused_before_the_engine_starts(
    tmp_path: Path, trace_format: str, lines: list[str], where: str
) -> None:
    # Issue 69: a turn no slot can hold was sent, and failed, after the engine started
    path = sessions_campaign(tmp_path, trace_format, lines)
    path.write_text(
        path.read_text().replace('model = "m.gguf"', 'model = "m.gguf"\nctx_size = 4096\nparallel = 2')
    )
    refused(path, tmp_path, where, "more than the 2048-token slot of d")


def test_the_dry_run_says_what_a_sessions_trace_holds(tmp_path: Path) -> None:
    second = '{"session": "a", "turn": 2, "gap_s": 2.5, "input_tokens": 100, "output_tokens": 8}'
    path = sessions_campaign(tmp_path, "sessions", [FIRST, second])
    dry = ctxbench("run", str(path), "--dry-run", cwd=tmp_path)
    assert dry.returncode == EXIT_OK, dry.stderr
    text = " ".join(dry.stdout.split())
    assert "sessions trace: 1 session(s), 2 turn(s) (new text 100-300 tokens a turn, gaps 2.5-2.5 s)" in text


def test_help_texts_keep_their_brackets(tmp_path: Path) -> None:
    assert "'ctxbench[ray]'" in " ".join(ctxbench("run", "--help", cwd=tmp_path).stdout.split())
    assert "`[checks.trace]`" in " ".join(ctxbench("sample-trace", "--help", cwd=tmp_path).stdout.split())


def test_a_log_gets_whole_lines_and_a_progress_line_on_a_timer() -> None:
    out = io.StringIO()
    console = Console(file=out, width=40, soft_wrap=True)
    with PlainProgress(console, interval_s=0.05) as progress:
        task = progress.add_task("requests", total=58)
        progress.advance(task, 3)
        deadline = time.monotonic() + 10
        while out.getvalue().count("requests: 3/58") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # two timer lines while nothing else happens
        progress.update(task, total=52)  # the total becomes what ran
        console.print("x" * 30 + "/a/path/that/is/longer/than/the/console.gguf", markup=False)
    lines = out.getvalue().splitlines()
    assert sum(line.startswith("requests: 3/58 (0:00:0") for line in lines) >= 2, lines
    assert lines[-1].startswith("requests: 3/52 ("), lines  # and once more as the work ends
    assert "x" * 30 + "/a/path/that/is/longer/than/the/console.gguf" in lines, lines


def test_a_failed_start_shows_the_engines_own_last_lines() -> None:
    error = EngineNotReady("llamacpp exited with code 1 during startup. Command: llama-server ...\nLog tail")
    error.engine_lines = ("E gguf_init_from_reader: invalid magic", "E llama_server: exiting")
    text = failure_lines("d", error)
    assert text.splitlines() == [
        "d: FAILED: llamacpp exited with code 1 during startup. Command: llama-server ...",
        "  the engine's last lines:",
        "    E gguf_init_from_reader: invalid magic",
        "    E llama_server: exiting",
    ]


@pytest.mark.parametrize("folder", ["odd[/b]", "odd[bold]x[/bold]"])  # a closing tag, then a style
def test_paths_are_printed_as_they_are_never_as_markup(folder: str, tmp_path: Path) -> None:
    here = tmp_path / folder
    here.mkdir(parents=True)
    path = campaign(here, LLAMA)
    dry = ctxbench("run", str(path), "--dry-run", cwd=here)
    assert dry.returncode == EXIT_OK and "Traceback" not in dry.stderr, dry.stderr
    assert f"results in {here / 'results'}" in dry.stdout
    (here / "trace.jsonl").write_text("oops\n")
    refused = ctxbench("run", str(path), cwd=here)
    assert refused.returncode == EXIT_USAGE and f"{here / 'trace.jsonl'}:1" in refused.stderr, refused.stderr


def test_a_tokenizer_that_cannot_be_read_is_refused_and_a_gguf_one_is_read(tmp_path: Path) -> None:
    # Issue 57: `tokenizer = "x.gguf"` read "CANNOT BE READ" in the dry run, which then said nothing was wrong
    # (rc 0). A .gguf is now read as its vocabulary; a tokenizer that cannot be read is refused, rc 2.
    from ctxbench.engines.models import tiny_model

    (tmp_path / "broken.gguf").write_text("not a gguf")
    external = 'engine = "external"\nurls = ["http://127.0.0.1:9"]\n'
    refused(campaign(tmp_path, external + 'tokenizer = "broken.gguf"'), tmp_path, "'d'", "cannot be read")
    path = campaign(tmp_path, external + f'tokenizer = "{tiny_model().gguf}"')
    dry = ctxbench("run", str(path), "--dry-run", cwd=tmp_path)
    assert dry.returncode == EXIT_OK, dry.stderr
    assert f"tokenizer: gguf:{tiny_model().gguf} (read)" in " ".join(dry.stdout.split()), dry.stdout


def test_the_request_count_never_passes_its_total_and_ends_at_what_ran() -> None:
    # Issue 57: the progress count passed its total ("95/89") where a check sent more than it planned.
    from ctxbench.cli.progress import RequestTally

    bar = PlainProgress(Console(file=io.StringIO()), interval_s=3600)
    with bar:
        task = bar.add_task("requests", total=4)
        tally = RequestTally(bar, task, {"a": 1, "b": 3})
        seen = []
        for _ in range(6):  # a plans 1 and sends 6: past the whole campaign's 4
            tally.done()
            seen.append((bar.tasks[task].completed, bar.tasks[task].total))
        tally.ended("a")
        assert bar.tasks[task].total == 6 + 3  # what a sent, and what b plans
        for _ in range(2):  # b plans 3 and sends 2 (a sweep that stopped early)
            tally.done()
            seen.append((bar.tasks[task].completed, bar.tasks[task].total))
        tally.ended("b")
    assert all(done <= total for done, total in seen), seen
    assert (bar.tasks[task].completed, bar.tasks[task].total) == (8, 8)
