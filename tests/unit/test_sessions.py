"""The agent-sessions check's arithmetic: its parameters, a level's hit ratio and verdict, the cliff, and the
planner's forecast of how many sessions the cache holds (the engine tests hold both to llama-server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.campaigns.preflight import fit_warnings
from ctxbench.checks.sessions.file import SessionsFile, SessionTurn, level_summary
from ctxbench.checks.sessions.forecast import pool_sessions_forecast, sessions_forecast
from ctxbench.checks.sessions.params import SessionsParams
from ctxbench.checks.sessions.recorded import (
    read_session_trace,
    sessions_of_mlperf_agentic,
    sessions_of_mooncake,
)
from ctxbench.checks.trace import TraceFileError
from ctxbench.engines.models import tiny_model
from ctxbench.errors import CampaignFileError
from ctxbench.text.tokens import HfTokenCounter


def turn(
    sessions: int, session: int, number: int, cached: int | None, reusable: int | None = 1000
) -> SessionTurn:
    return SessionTurn(
        sessions=sessions,
        session=session,
        turn=number,
        request_id=f"s{sessions}-{session}-t{number}",
        ok=True,
        gap_s=None if number == 1 else 1.0,
        prompt_tokens=1100 * number,
        reusable_tokens=None if number == 1 else reusable,
        cached_tokens=cached,
        reprefill_tokens=None if cached is None else 1100 * number - cached,
        ttft_s=0.1,
    )


def test_levels_rise_and_turn_sizes_are_a_range() -> None:
    with pytest.raises(ValidationError, match="must rise"):
        SessionsParams(sessions=[2, 1])
    with pytest.raises(ValidationError, match="turn_tokens_max"):
        SessionsParams(turn_tokens=2048, turn_tokens_max=1024)
    params = SessionsParams(sessions=[1, 2], turns=4, turn_tokens="1K", system_tokens=512)
    assert params.request_count() == 12
    # a context that ends a session after fewer turns counts fewer requests
    assert SessionsParams(sessions=[1], turns=8, turn_tokens=1000, context=3000).planned_turns() < 8


def test_a_level_holds_on_its_returning_turns_cached_share() -> None:
    params = SessionsParams(sessions=[1, 2], hit_threshold=0.5)
    kept = level_summary(1, [turn(1, 0, 1, 0), turn(1, 0, 2, 990), turn(1, 0, 3, 1010)], params, 1)
    assert kept.returning == 2 and kept.held_turns == 2 and kept.holds
    assert kept.hit_ratio == pytest.approx((990 + 1000) / 2000)  # a count beyond the context counts it whole
    lost = level_summary(2, [turn(2, 0, 1, 0), turn(2, 0, 2, 30), turn(2, 1, 2, 600)], params, 1)
    assert lost.held_turns == 0 and lost.hit_ratio == pytest.approx(630 / 2000) and lost.holds is False
    assert lost.reprefill_tokens == (2200 - 30) + (2200 - 600)
    # a server that reports no cached tokens: neither held nor fallen, not reported
    silent = level_summary(2, [turn(2, 0, 1, None), turn(2, 0, 2, None)], params, 1)
    assert silent.hit_ratio is None and silent.holds is None and silent.held_turns is None
    data = SessionsFile.of(params, [lost, kept], [])
    assert (data.held, data.cliff) == (1, 2) and [level.sessions for level in data.levels] == [1, 2]


def test_the_forecast_counts_slots_and_whole_sessions_in_the_host_cache() -> None:
    assert (
        sessions_forecast(session_tokens=4096, slots=2, host_cache_bytes=0, kv_bytes_per_token=1024).held == 2
    )
    unlimited = sessions_forecast(
        session_tokens=4096, slots=2, host_cache_bytes=None, kv_bytes_per_token=1024
    )
    assert unlimited.held is None and unlimited.holds(1000)
    # room for 3.5 sessions of 4096 tokens at 1 KiB a token: three whole ones, but the slot's prompt is saved
    # before the returning one is looked up, so two more sessions beside the two slots
    roomy = sessions_forecast(
        session_tokens=4096, slots=2, host_cache_bytes=3.5 * 4096 * 1024, kv_bytes_per_token=1024
    )
    assert roomy.held == 4 and roomy.holds(4) and not roomy.holds(5)


def test_a_block_pool_holds_the_whole_sessions_that_fit() -> None:
    pool = pool_sessions_forecast(session_tokens=850, kv_tokens=1792, source="vLLM's log")
    assert pool.held == 2 and pool.holds(2) and not pool.holds(3) and "1792-token KV cache" in pool.basis


def test_a_session_trace_reads_turns_by_session_and_names_bad_lines(tmp_path: Path) -> None:
    trace = tmp_path / "s.jsonl"
    lines = [
        {"session": "b", "turn": 1, "timestamp": 500, "input_tokens": 100, "output_tokens": 8},
        {"session": "a", "turn": 2, "gap_s": 4.5, "input_tokens": 50, "output_tokens": 8},
        {
            "session": "a",
            "turn": 1,
            "timestamp": 0,
            "input_tokens": 300,
            "output_tokens": 8,
            "shared_prefix": "sys",
            "shared_prefix_tokens": 64,
        },
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    a, b = read_session_trace(trace)
    assert (a.name, a.shared_prefix, a.shared_prefix_tokens) == ("a", "sys", 64)
    assert [(t.new_tokens, t.at_s, t.gap_s) for t in a.turns] == [(300, 0.0, None), (50, None, 4.5)]
    assert (b.name, b.turns[0].at_s) == ("b", 0.5)
    trace.write_text('{"session": "a", "turn": 1, "input_tokens": 5, "output_tokens": 1}\n')
    with pytest.raises(TraceFileError, match=r"s.jsonl:1: a session's first turn needs a timestamp"):
        read_session_trace(trace)
    trace.write_text('{"session": "a", "timestamp": 0, "input_tokens": 0, "output_tokens": 1}\n')
    with pytest.raises(TraceFileError, match=r"s.jsonl:1: input_tokens is 0"):
        read_session_trace(trace)


def test_a_mooncake_trace_becomes_sessions_by_its_growing_hash_ids(tmp_path: Path) -> None:
    trace = tmp_path / "m.jsonl"
    lines = [
        {"timestamp": 0, "input_length": 1000, "output_length": 50, "hash_ids": [1, 2]},
        {"timestamp": 100, "input_length": 900, "output_length": 50, "hash_ids": [1, 7]},  # shares block 1
        {"timestamp": 9000, "input_length": 1600, "output_length": 50, "hash_ids": [1, 2, 3, 4]},
        {"timestamp": 9500, "input_length": 400, "output_length": 20, "hash_ids": [9]},
        {"timestamp": 20000, "input_length": 2100, "output_length": 50, "hash_ids": [1, 2, 3, 4, 5]},
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first, second, third = sessions_of_mooncake(trace, block_tokens=512)
    # the first request, then the two whose prompts extend it, in order: a conversation of three turns
    assert [(t.new_tokens, t.at_s) for t in first.turns] == [(1000, 0.0), (550, 9.0), (450, 20.0)]
    assert first.shared_prefix is None
    # its own session, sharing the first block with the first session's first turn: a system prompt
    assert [t.new_tokens for t in second.turns] == [900] and second.shared_prefix_tokens == 512
    assert second.shared_prefix == "mooncake-1" and third.shared_prefix is None
    # a trace replaces the levels: its sessions run as they were recorded, one level
    assert SessionsParams(sessions=[1, 2], trace=trace).request_count() == 0


def test_mlperf_agentic_conversations_become_sessions_by_their_lengths(tmp_path: Path) -> None:
    # Rows as mlcommons/endpoints' AgenticInferenceDataset reads them (user, assistant, tool; delay_seconds)
    counter = HfTokenCounter.from_path(tiny_model().tokenizer_dir)
    call = [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]
    rows = [
        {"_type": "dataset_metadata", "version": 1},
        {
            "conversation_id": "a",
            "turn": 1,
            "role": "user",
            "content": "fix the bug " * 20,
            "system": "be brief",
        },
        {"conversation_id": "a", "turn": 2, "role": "assistant", "content": None, "tool_calls": call},
        {
            "conversation_id": "a",
            "turn": 3,
            "role": "tool",
            "tool_results": [{"tool_call_id": "c1", "content": "x " * 50}],
            "delay_seconds": 1.5,
        },
        {"conversation_id": "a", "turn": 4, "role": "assistant", "content": "done " * 7},
        {
            "conversation_id": "b",
            "turn": 1,
            "role": "user",
            "content": "hello",
            "system": "be brief",
            "max_completion_tokens": 40,
        },
    ]
    trace = tmp_path / "agentic.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    a, b = sessions_of_mlperf_agentic(trace, counter, stagger_s=2.0)
    first, tool = a.turns
    assert first.new_tokens == counter.count_many(["fix the bug " * 20])[0] and first.at_s == 0.0
    assert first.output_tokens == counter.count_many([json.dumps(call)])[0]  # the recorded reply: a tool call
    assert tool.new_tokens == counter.count_many(["x " * 50])[0] and (tool.at_s, tool.gap_s) == (None, 1.5)
    assert tool.output_tokens == counter.count_many(["done " * 7])[0]
    # no recorded reply: the row's max tokens; the second conversation starts stagger_s later
    assert b.turns[0].output_tokens == 40 and b.turns[0].at_s == 2.0
    assert a.shared_prefix == b.shared_prefix is not None and a.shared_prefix_tokens >= 1
    # Issue 69: upstream's budget caps a recorded reply (186 tokens replayed where upstream asks 64), a
    # conversation's later rows take its first user row's budget, and a first turn's delay is kept
    long_reply = "word " * 300
    rows = [
        {
            "conversation_id": "c",
            "turn": 1,
            "role": "user",
            "content": "go",
            "max_new_tokens": 64,
            "delay_seconds": 2.5,
        },
        {"conversation_id": "c", "turn": 2, "role": "assistant", "content": long_reply, "tool_calls": call},
        {
            "conversation_id": "c",
            "turn": 3,
            "role": "tool",
            "tool_results": [{"tool_call_id": "c1", "content": "ok"}],
        },
        {"conversation_id": "c", "turn": 4, "role": "assistant", "content": long_reply},
        {"conversation_id": "d", "turn": 1, "role": "user", "content": "hi"},
        {"conversation_id": "d", "turn": 2, "role": "assistant", "content": long_reply},
    ]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert counter.count_many([long_reply])[0] > 128
    c, d = sessions_of_mlperf_agentic(trace, counter, stagger_s=2.0)
    assert [t.output_tokens for t in c.turns] == [64, 64]  # the tool row takes the first user row's budget
    assert c.turns[0].at_s == 2.5 and c.turns[1].gap_s == 0.0  # the first turn's delay, from the start
    assert d.turns[0].output_tokens == 128 and d.turns[0].at_s == 2.0  # upstream's default budget
    trace.write_text('{"conversation_id": "a", "turn": 1, "role": "system", "content": "x"}\n')
    with pytest.raises(
        TraceFileError, match=r"agentic.jsonl:1: role is 'system'; give user, assistant or tool"
    ):
        sessions_of_mlperf_agentic(trace, counter)


SESSIONS_CAMPAIGN = """
[campaign]
name = "s"
results = "{results}"

[checks.sessions]
{table}

[[deployments]]
name = "two-slots"
engine = "llamacpp"
model = "ctxbench:tiny"
ctx_size = 4096
parallel = 2
tokenizer = "server"
"""


def test_a_missing_session_trace_is_refused_naming_its_key_and_sessions_too_long_are_warned(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.toml"
    missing = tmp_path / "nope.jsonl"
    path.write_text(SESSIONS_CAMPAIGN.format(results=tmp_path / "r", table=f'trace = "{missing}"'))
    with pytest.raises(
        CampaignFileError, match=r"c.toml:\d+: checks.sessions.trace: .*nope.jsonl' is not a file"
    ):
        load_campaign(path)
    # 8 turns of 2K over a 1K system prompt cannot fit a 2048-token slot: the dry run says so first
    path.write_text(SESSIONS_CAMPAIGN.format(results=tmp_path / "r", table="turns = 8"))
    campaign = load_campaign(path)
    (deployment,) = campaign.deployments
    warnings = fit_warnings(deployment, campaign.checks_for(deployment))
    assert any(w.startswith("sessions grow to about ") and "2048-token slot" in w for w in warnings), warnings


def _agentic(*rows: dict) -> list[dict]:
    return [{"conversation_id": "a", "turn": n, **row} for n, row in enumerate(rows, start=1)]


CALL = {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
USER = {"role": "user", "content": "go"}
ASKS = {"role": "assistant", "content": None, "tool_calls": [CALL]}
RESULT = {"role": "tool", "tool_results": [{"tool_call_id": "c1", "content": "ok"}]}


@pytest.mark.parametrize(
    "rows, words",
    [
        # Issue 69: files MLPerf Endpoints refuses were read (its own rules, agentic.py)
        (
            [
                *_agentic(USER),
                {"conversation_id": "b", "turn": 1, **USER},
                {"conversation_id": "a", "turn": 2, "role": "assistant", "content": "x"},
            ],
            r"jsonl:3: the rows of conversation 'a' are not together",
        ),
        (
            _agentic(USER, {"role": "assistant", "content": "x"}, RESULT),
            r"jsonl:3: a tool row follows an assistant",
        ),
        (
            _agentic(USER, ASKS, USER),
            r"jsonl:3: turn 3 is a user row after a assistant|a user row after tool calls",
        ),
        (
            _agentic({"role": "assistant", "content": "x"}),
            r"jsonl:1: turn 1 is a assistant row after a start row",
        ),
        (
            _agentic(USER, {"role": "assistant", "content": ""}),
            r"jsonl:2: an assistant row needs non-empty content",
        ),
        (
            _agentic(USER, {**ASKS, "tool_calls": [{**CALL, "type": "x"}]}),
            r'tool_calls\[0\]: type must be "function"',
        ),
        (
            _agentic(USER, ASKS, {"role": "tool", "tool_results": [{"content": "ok"}]}),
            r"tool_results\[0\] needs a",
        ),
        (_agentic({"role": "user", "content": ""}), r"jsonl:1: a user row needs non-empty content"),
        ([{"conversation_id": "a", "turn": 2, **USER}], r"has turns \[2\]; number them 1, 2"),
        ([{"conversation_id": "a\u00e9", "turn": 1, **USER}], r"not printable ASCII"),
    ],
)
def test_an_agentic_file_mlperf_refuses_is_refused_at_its_line(
    tmp_path: Path, rows: list[dict], words: str
) -> None:
    trace = tmp_path / "agentic.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(TraceFileError, match=words):
        sessions_of_mlperf_agentic(trace, HfTokenCounter.from_path(tiny_model().tokenizer_dir))


def test_an_agentic_tool_loop_mlperf_accepts_is_read() -> None:
    from ctxbench.checks.sessions.agentic import check_conversation

    rows = [
        (n, row, f"f:{n}")
        for n, row in enumerate(
            [USER, ASKS, RESULT, ASKS, RESULT, {"role": "assistant", "content": "done"}, USER], start=1
        )
    ]
    check_conversation("a", rows)  # user -> assistant -> (tool -> assistant)* -> user
