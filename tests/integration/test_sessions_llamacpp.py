"""Agent sessions against the real llama-server: concurrent growing sessions with idle gaps keep their context
while the slots and host prompt cache hold them, fall off a cliff one session beyond, and the cliff sits where
the planner's forecast puts it and moves when the cache budget moves."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from campaigns import run_one, tiny_llamacpp, write_campaign

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.campaigns.suite import run_suite
from ctxbench.checks.catalog import Checks
from ctxbench.checks.sessions.cell import forecast_of
from ctxbench.checks.sessions.file import SessionsFile
from ctxbench.checks.sessions.params import SessionsParams
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServerConfig
from ctxbench.engines.models import TinyModel
from ctxbench.errors import EXIT_INTERRUPTED
from ctxbench.measure import metrics
from ctxbench.report.decide import readings
from ctxbench.report.run_report import claims_summary, run_report
from ctxbench.results.evidence import collect
from ctxbench.store.counters import counter_deltas
from ctxbench.store.run_dir import RunDir
from ctxbench.text.tokens import HfTokenCounter

pytestmark = pytest.mark.engine

# Two slots of 4096 tokens; a session grows to ~2.9K tokens over 4 turns. The shared system prompt and
# template are well under 10% of a first turn: llama.cpp gives a new prompt the idle slot whose prompt it
# shares more than `--slot-prompt-similarity` (0.1) of, so a larger shared prefix would hand one session's
# slot to the next session's first turn (docs/campaigns.md, "Agent sessions").
SESSIONS = """
[checks.sessions]
sessions = [1, 2, 3]
system_tokens = 16
turn_tokens = 600
max_tokens = 8
turns = 4
gap_s = 0.5
stop_after_cliff = false
session_header = "X-Session-ID"
"""


@pytest.mark.parametrize(
    ("args", "held", "cliff"),
    [
        ("[]", 3, None),  # llama-server's default --cache-ram 8192: pushed-out sessions come back from RAM
        ('["--cache-ram", "0"]', 2, 3),  # no host prompt cache: two slots hold two sessions, no more
    ],
)
def test_sessions_hold_until_the_cliff_the_forecast_puts(
    tiny: TinyModel, tmp_path: Path, args: str, held: int, cliff: int | None
) -> None:
    run = run_one(tmp_path, SESSIONS, tiny_llamacpp(tiny, ctx_size=8192, args=args))
    data = SessionsFile.load(run.path)
    assert data is not None and [level.sessions for level in data.levels] == [1, 2, 3]
    assert (data.held, data.cliff) == (held, cliff)
    # the planner said the same from the engine's command and the model's shape
    forecast = forecast_of(run, data)
    assert forecast is not None and [forecast.holds(s) for s in (1, 2, 3)] == [s <= held for s in (1, 2, 3)]
    records = [r for r in run.records() if r.labels.get("check") == "sessions"]
    assert len(records) == 24 and all(r.ok for r in records)
    assert len({r.request_id for r in records}) == 24
    # every prompt token-exact: each turn is its whole history as the server holds it, plus 600 new tokens
    assert all(metrics.prompt_tokens(r) == int(r.labels["planned_tokens"]) for r in records)
    # each returning turn waited its gap (built during it), measured from the previous reply's end
    assert all(float(r.labels["gap_s"]) >= 0.5 for r in records if r.labels["turn"] != "1")
    for level in data.levels:
        back = [t for t in data.turns if t.sessions == level.sessions and t.turn > 1]
        assert level.returning == len(back) == 3 * level.sessions
        if level.sessions <= held:
            assert level.holds and level.hit_ratio is not None and level.hit_ratio >= 0.9
        else:  # pushed out in turn: only the template and system prompt (~30 of ~700+ tokens) come back
            assert level.holds is False and level.hit_ratio is not None and level.hit_ratio < 0.2
            assert level.reprefill_tokens is not None and level.reprefill_tokens > 0.8 * sum(
                t.prompt_tokens or 0 for t in back
            )
    # llama.cpp's own counter over each level agrees with the records' cached tokens
    deltas = counter_deltas(run)
    for level in data.levels:
        mine = [r for r in records if r.labels["sessions"] == str(level.sessions)]
        assert deltas[f"sessions-s{level.sessions}"]["prefix_cache_hits"] == sum(
            metrics.cached_tokens(r) or 0 for r in mine
        )
    audit = audit_run(run)
    assert not audit.findings and audit.audited_requests >= 24
    report = run_report(run)
    assert "## Agent sessions" in report and "| holds | forecast |" in report
    assert (run.path / "sessions.png").exists()
    assert any(line.startswith(f"agent sessions: holds {held} sessions") for line in claims_summary(run))
    (row,) = collect(tmp_path / "results")
    assert row.cell("sessions").text.startswith(f"holds {held} sessions of ")
    assert any(g.question.startswith("Keeps the most concurrent agent sessions") for g in readings([row]))


class Interrupt(Exception):
    pass


def test_a_level_cut_off_is_sent_again_whole_and_the_levels_before_are_kept(
    llama_build: LlamaCppBuild, tiny: TinyModel, tmp_path: Path
) -> None:
    # Each level is a unit: a resumed run reads the finished ones back and sends the cut one whole under new
    # ids, with a new system prompt (the interrupted attempt's may sit in the cache).
    config = LlamaServerConfig(
        binary=llama_build.server, model=tiny.gguf, ctx_size=8192, parallel=2, alias="tiny"
    )
    counter = HfTokenCounter.from_path(tiny.tokenizer_dir)
    checks = Checks(
        sessions=SessionsParams(
            sessions=[1, 2], system_tokens=16, turn_tokens=300, max_tokens=8, turns=3, gap_s=0.2
        )
    )
    results = tmp_path / "results"
    sent = 0

    def cut_in_level_two() -> None:  # level 1's 3 turns, then 2 of level 2's 6
        nonlocal sent
        sent += 1
        if sent == 5:
            raise Interrupt()

    with pytest.raises(Interrupt):
        run_suite(
            config,
            counter,
            checks,
            results,
            deployment="tiny",
            campaign="cut",
            on_request_done=cut_in_level_two,
        )
    (path,) = (results / "runs").iterdir()
    assert RunDir(path).completed_units() == {"sessions-s1"}
    run = run_suite(config, counter, checks, results, deployment="tiny", campaign="cut", resume=path)
    assert run.attempt == 2
    data = SessionsFile.load(run.path)
    assert data is not None and [(level.sessions, level.attempt) for level in data.levels] == [(1, 1), (2, 2)]
    assert [t.request_id for t in data.turns if t.sessions == 2] == [
        f"sessions-s2-{session}-t{turn}-a2" for session in (0, 1) for turn in (1, 2, 3)
    ]
    records = list(run.records())
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids))
    # the new attempt's first turns found no more than the template cached: a new system prompt
    firsts = [r for r in records if r.request_id.endswith("-t1-a2")]
    lead = min(metrics.cached_tokens(r) or 0 for r in firsts)
    assert lead < 16, [metrics.cached_tokens(r) for r in firsts]
    audit = audit_run(run)
    assert audit.findings == () and audit.audited_requests == len([r for r in records if r.ok])


# A Mooncake slice of three conversations (64-token blocks): A returns at once (nothing between), then B and C
# start, taking both slots, and A returns 2.7 s later; B returns after A's third turn took its slot.
MOONCAKE = [
    {"timestamp": 0, "input_length": 256, "output_length": 8, "hash_ids": [1, 2, 3, 4]},
    {"timestamp": 300, "input_length": 512, "output_length": 8, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8]},
    {"timestamp": 1000, "input_length": 256, "output_length": 8, "hash_ids": [20, 21, 22, 23]},
    {"timestamp": 1300, "input_length": 256, "output_length": 8, "hash_ids": [40, 41, 42, 43]},
    {"timestamp": 3000, "input_length": 768, "output_length": 8, "hash_ids": list(range(1, 13))},
    {
        "timestamp": 3300,
        "input_length": 512,
        "output_length": 8,
        "hash_ids": [20, 21, 22, 23, 24, 25, 26, 27],
    },
]


def test_a_mooncake_trace_replays_as_sessions_at_its_own_times(tiny: TinyModel, tmp_path: Path) -> None:
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in MOONCAKE))
    run = run_one(
        tmp_path,
        f'[checks.sessions]\ntrace = "{trace}"\ntrace_format = "mooncake"\nblock_tokens = 64\n',
        tiny_llamacpp(tiny, ctx_size=8192, args='["--cache-ram", "0"]'),
    )
    data = SessionsFile.load(run.path)
    assert data is not None and [(level.sessions, level.unit) for level in data.levels] == [
        (3, "sessions-trace")
    ]
    records = sorted(run.records(), key=lambda r: r.sent_ns)
    assert [(r.labels["session"], r.labels["turn"]) for r in records] == [
        ("0", "1"),
        ("0", "2"),
        ("1", "1"),
        ("2", "1"),
        ("0", "3"),
        ("1", "2"),
    ]
    # due at the trace's times (its first request at 0) or once the previous reply ended, and sent then
    start = records[0].enqueued_ns
    for record, line in zip(records, MOONCAKE, strict=True):
        assert (record.enqueued_ns - start) / 1e9 >= line["timestamp"] / 1000 - 0.001, record.request_id
        assert record.sent_ns >= record.enqueued_ns
    # every prompt exactly as long as the trace's line: its history (the server's own replies fed forward),
    # then fresh text up to input_length
    assert [metrics.prompt_tokens(r) for r in records] == [line["input_length"] for line in MOONCAKE]
    hits = {(t.session, t.turn): t.hit for t in data.turns}
    assert hits[(0, 2)] is not None and hits[(0, 2)] >= 0.9  # back at once: still in its slot
    assert hits[(0, 3)] is not None and hits[(0, 3)] < 0.2  # two other sessions took both slots meanwhile
    assert hits[(1, 2)] is not None and hits[(1, 2)] < 0.2
    by_gap = {group: hit for group, _, hit in data.hit_by_gap()}
    assert by_gap["0-1 s"] >= 0.9 and by_gap["1-5 s"] < 0.2
    report = run_report(run)
    assert "| gap | turns | hit ratio |" in report and "| 1-5 s | 2 |" in report
    # Issue 69: the section described the parameters' defaults ("8 turns of 2048 tokens with fixed 30 s
    # gaps"), which never ran, and never named the trace; it names the trace and what was sent of it
    section = report.split("## Agent sessions")[1].split("\n## ")[0]
    prompts = [line["input_length"] for line in MOONCAKE]
    assert f"A recorded trace replayed at its own times: `{trace}` (mooncake), 3 sessions, 6 turns" in section
    assert f"prompts of {min(prompts)}-{max(prompts)} tokens" in section and "the trace's gaps (" in section
    assert "2048 new tokens" not in section and "fixed 30 s gaps" not in section, section
    assert not audit_run(run).findings


def test_mlperf_agentic_conversations_replay_by_their_lengths_and_delays(
    tiny: TinyModel, tmp_path: Path
) -> None:
    # MLPerf Endpoints' agentic rows: a user turn, a tool call, its result 0.4 s later, a reply; a second
    # conversation of one turn under the same system prompt.
    call = [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"q": "bug"}'}}]
    rows = [
        {
            "conversation_id": "a",
            "turn": 1,
            "role": "user",
            "content": "fix the parser " * 60,
            "system": "Be brief.",
            "max_new_tokens": 8,  # upstream's budget, below the recorded tool call's length
            "delay_seconds": 0.3,  # after the conversation's start, as upstream delays a first turn
        },
        {"conversation_id": "a", "turn": 2, "role": "assistant", "content": None, "tool_calls": call},
        {
            "conversation_id": "a",
            "turn": 3,
            "role": "tool",
            "delay_seconds": 0.4,
            "tool_results": [{"tool_call_id": "c1", "content": "line 12: bad token " * 30}],
        },
        {"conversation_id": "a", "turn": 4, "role": "assistant", "content": "Fixed the tokenizer."},
        {
            "conversation_id": "b",
            "turn": 1,
            "role": "user",
            "content": "summarise the log " * 40,
            "system": "Be brief.",
            "max_completion_tokens": 12,
        },
    ]
    trace = tmp_path / "agentic.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = run_one(
        tmp_path,
        f'[checks.sessions]\ntrace = "{trace}"\ntrace_format = "mlperf-agentic"\nstagger_s = 0.2\n',
        tiny_llamacpp(tiny, ctx_size=8192, args="[]"),
    )
    counter = HfTokenCounter.from_path(tiny.tokenizer_dir)
    records = {r.request_id: r for r in run.records()}
    first, tool, other = (records[f"sessions-trace-{n}-t{t}"] for n, t in ((0, 1), (0, 2), (1, 1)))
    assert len(records) == 3 and all(r.ok for r in records.values())
    # each reply as long as the recorded one (the tool call, then the answer) within upstream's budget (the
    # row's max tokens, the tool row taking its conversation's), else the row's max tokens (issue 69: a
    # recorded reply of 186 tokens was replayed where upstream asks 64)
    assert counter.count_many([json.dumps(call)])[0] > 8 and first.max_tokens == 8
    assert (
        tool.max_tokens == min(8, counter.count_many(["Fixed the tokenizer."])[0]) and other.max_tokens == 12
    )
    assert float(tool.labels["gap_s"]) >= 0.4  # MLPerf's delay_seconds after the previous reply
    # the first conversation's first turn waits its 0.3 s delay, the second starts at its 0.2 s stagger
    assert (first.enqueued_ns - other.enqueued_ns) / 1e9 == pytest.approx(0.1, abs=0.001)
    data = SessionsFile.load(run.path)
    # the tool turn found its whole previous prompt in the slot (the random model's reply, re-read, may vary)
    assert data is not None and (data.turns[1].cached_tokens or 0) >= (metrics.prompt_tokens(first) or 1)
    assert not audit_run(run).findings


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_replay_waiting_out_a_long_gap_ends_at_once_on_a_signal(
    tiny: TinyModel, tmp_path: Path, sig: signal.Signals
) -> None:
    # Issue 69: a trace line's gap of 1e12 s waited for ever and SIGTERM there printed a traceback. A gap is
    # now at most a day (refused beyond, before anything starts); waiting one out, a signal ends the run:
    # exit 130, said so, no traceback, the first turn's record kept.
    trace = tmp_path / "gaps.jsonl"
    trace.write_text(
        '{"session": "a", "turn": 1, "timestamp": 0, "input_tokens": 200, "output_tokens": 4}\n'
        '{"session": "a", "turn": 2, "gap_s": 3600, "input_tokens": 100, "output_tokens": 4}\n'
    )
    path = write_campaign(tmp_path, f'[checks.sessions]\ntrace = "{trace}"\n', tiny_llamacpp(tiny))
    child = subprocess.Popen(
        [sys.executable, "-m", "ctxbench", "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's Ctrl-C reaches it
    )
    try:
        deadline = time.monotonic() + 120
        answered = False
        while time.monotonic() < deadline and not answered and child.poll() is None:
            time.sleep(0.1)
            answered = any(
                "sessions-trace-0-t1" in requests.read_text()
                for requests in (tmp_path / "results" / "runs").glob("*/requests.jsonl")
            )
        assert answered, "the first turn never came back"
        child.send_signal(sig)
        _, stderr = child.communicate(timeout=30)  # not the hour the gap asks for
    finally:
        child.kill()
    assert child.returncode == EXIT_INTERRUPTED, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
