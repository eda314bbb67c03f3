"""Ramp schedules, stall figures on hand-built records, recall counting, the ramp table."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from ctxbench.checks.ramp import RampParams
from ctxbench.checks.ramp.check import Turn, ramp_schedule, recall_k_of_n
from ctxbench.checks.ramp.labels import user_of
from ctxbench.checks.ramp.table import RAMP_COLUMNS, RampRow, append_rows, read_rows
from ctxbench.measure import decode_stall
from ctxbench.records import Chunk, RequestRecord, Usage

MS = 1_000_000


def rec(request_id: str, user: str, sent_ms: float, chunk_ms: list[float]) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        endpoint="chat",
        url="http://127.0.0.1:1/x",
        model="m",
        labels={"user": user},
        request_bytes=1,
        enqueued_ns=int(sent_ms * MS),
        sent_ns=int(sent_ms * MS),
        end_ns=int((chunk_ms[-1] if chunk_ms else sent_ms) * MS),
        chunks=tuple(Chunk(arrived_ns=int(t * MS), text="x") for t in chunk_ms),
        usage=Usage(prompt_tokens=10, completion_tokens=len(chunk_ms)),
    )


def test_default_schedule_is_geometric_from_32k_to_1m_in_ten_turns() -> None:
    turns = ramp_schedule(RampParams())
    assert len(turns) == 10 and turns[0] == 32768 and turns[-1] == 1048576
    ratios = [b / a for a, b in itertools.pairwise(turns)]
    assert max(ratios) - min(ratios) < 0.001


def test_linear_schedule_and_a_single_turn() -> None:
    assert ramp_schedule(RampParams(start=1000, end=5000, turns=5, schedule="linear")) == [
        1000,
        2000,
        3000,
        4000,
        5000,
    ]
    assert ramp_schedule(RampParams(start=1000, end=7000, turns=1)) == [7000]


def test_a_schedule_that_shrinks_is_refused_by_the_schema() -> None:
    with pytest.raises(ValidationError, match=r"end \(1000\) is shorter than start \(9000\)"):
        RampParams(start=9000, end=1000)


def test_second_user_prefill_is_visible_as_decode_stall() -> None:
    # User 0 decodes a token every 10 ms (100 tok/s) from t=0 to 2 s, except during user 1's prefill
    # (0.5 s -> 1.5 s), when one token arrives every 100 ms (10 tok/s).
    times = [10.0 * i for i in range(51)]
    times += [500 + 100.0 * i for i in range(1, 11)]
    times += [1500 + 10.0 * i for i in range(1, 51)]
    decoding = rec("a", "0", -100, times)
    newcomer = rec("b", "1", 500, [1500, 1510])
    figure = decode_stall.stall(decoding, [newcomer])
    assert figure is not None
    assert figure.time_inside_s == pytest.approx(1.0)
    assert figure.rate_inside == pytest.approx(10.0)
    assert figure.rate_outside == pytest.approx(100.0)
    assert figure.factor == pytest.approx(10.0)
    assert figure.window == "client"
    assert (
        decode_stall.format_stall(figure) == "100 -> 10 tokens/s (10.0x; send -> first token, an upper bound)"
    )


def timed(record: RequestRecord, prompt_ms: float) -> RequestRecord:
    return record.model_copy(update={"server_timings": {"prompt_ms": prompt_ms, "prompt_n": 1000}})


def test_the_engines_prompt_time_draws_the_window_the_upload_left_out() -> None:
    # User 1's 1 s send -> first token (0.5 s -> 1.5 s) held 0.6 s of uploading and tokenizing a long body
    # while user 0 still decoded alone at 100 tok/s; the engine's prompt_ms says its prefill was the last
    # 0.4 s, when user 0 got 10 tok/s. The client's window mixes the two (64 tokens in 1 s: 1.6x); the
    # engine's gives 10x.
    times = [10.0 * i for i in range(111)]
    times += [1100 + 100.0 * i for i in range(1, 5)]
    times += [1500 + 10.0 * i for i in range(1, 51)]
    decoding = rec("a", "0", -100, times)
    newcomer = rec("b", "1", 500, [1500, 1510])
    client = decode_stall.stall(decoding, [newcomer])
    engine = decode_stall.stall(decoding, [timed(newcomer, 400)])
    assert client is not None and client.window == "client" and client.factor == pytest.approx(1.5625)
    assert engine is not None and engine.window == "engine"
    assert engine.time_inside_s == pytest.approx(0.4) and engine.factor == pytest.approx(10.0)
    assert decode_stall.format_stall(engine) == "100 -> 10 tokens/s (10.0x; engine's prefill time)"
    assert (
        decode_stall.prefill_window(timed(newcomer, 5000)).start_ns == newcomer.sent_ns
    )  # never before send
    mixed = decode_stall.stall(decoding, [timed(newcomer, 400), rec("c", "2", 1600, [1700])])
    assert mixed is not None and mixed.window == "mixed"


def test_a_decode_no_slower_inside_is_never_shown_as_a_stall() -> None:
    # Seen at 1M on an H100: the other user's send -> first token window held a long upload while this decode
    # ran faster (warm) than before it: 623 tok/s outside, 1,330 inside, "0.47x".
    times = [10.0 * i for i in range(101)] + [1000 + 5.0 * i for i in range(1, 101)]
    figure = decode_stall.stall(rec("a", "0", -100, times), [rec("b", "1", 1000, [1500])])
    assert figure is not None and figure.factor == pytest.approx(0.5) and not figure.slowed
    assert decode_stall.format_stall(figure) == (
        "100 -> 200 tokens/s (not slower: no prefill competed with the decode)"
    )
    assert decode_stall.format_factor("0.5000", "client") == "not slower"
    assert decode_stall.format_factor("12.3400", "engine") == "12.3x"
    assert decode_stall.format_factor("12.3400", "") == "12.3x (client)"
    assert decode_stall.format_factor("inf", "mixed") == "stalled (mixed)"
    assert decode_stall.format_factor("", "") == "-"


def test_one_user_reports_no_stall() -> None:
    alone = rec("a", "0", 0, [100.0 + 10 * i for i in range(20)])
    stalls = decode_stall.user_stalls([alone], user_of)
    figure = stalls["a"]
    assert figure is not None and figure.time_inside_s == 0 and figure.rate_inside is None
    assert "no overlap" in decode_stall.format_stall(figure)


def test_a_blocked_decode_counts_its_one_token_across_the_window() -> None:
    # Nothing arrives during the other user's 1 s prefill: the straddling gap's token is split by time.
    decoding = rec("a", "0", 0, [0, 10, 20, 1030, 1040])
    figure = decode_stall.stall(decoding, [rec("b", "1", 25, [1025])])
    assert figure is not None and figure.time_inside_s == pytest.approx(1.0)
    assert figure.rate_inside is not None and figure.rate_inside < 1.0
    assert figure.factor is not None and figure.factor > 50 and not math.isinf(figure.factor)


def test_pooled_stall_weights_by_time() -> None:
    a = decode_stall.Stall("a", tokens_inside=10, time_inside_s=1, tokens_outside=100, time_outside_s=1)
    b = decode_stall.Stall("b", tokens_inside=0, time_inside_s=1, tokens_outside=100, time_outside_s=1)
    pooled = decode_stall.pooled_stall([a, None, b])
    assert pooled is not None and pooled.rate_inside == 5 and pooled.rate_outside == 100


def test_recall_counts_answered_turns_only() -> None:
    turns = [
        Turn(2, 0, 1, 100, 0, None, True, None),
        Turn(2, 0, 2, 200, 90, None, False, None),
        Turn(2, 1, 1, 100, 0, None, None, "context_limit: too long"),
    ]
    assert recall_k_of_n(turns) == (1, 2)


def test_ramp_table_round_trips(tmp_path: Path) -> None:
    row = RampRow(**{column: f"v-{column}" for column in RAMP_COLUMNS})
    table = tmp_path / "ramp1m.csv"
    append_rows(table, [row])
    append_rows(table, [row.model_copy(update={"turn": "2"})])
    rows = read_rows(table)
    assert rows == [row, row.model_copy(update={"turn": "2"})]
    assert table.read_text().count("deployment,users,user,turn") == 1


def test_a_table_from_before_a_column_is_rewritten_under_todays_header(tmp_path: Path) -> None:
    old_columns = [c for c in RAMP_COLUMNS if c != "stall_window"]
    table = tmp_path / "ramp1m.csv"
    table.write_text(",".join(old_columns) + "\n" + ",".join(f"o-{c}" for c in old_columns) + "\n")
    row = RampRow(**{column: f"v-{column}" for column in RAMP_COLUMNS})
    append_rows(table, [row])
    rows = read_rows(table)
    assert rows[0] == RampRow(**{c: f"o-{c}" for c in old_columns})  # stall_window ""
    assert rows[0].stall_window == "" and rows[1] == row


def test_an_overlap_of_a_few_milliseconds_says_nothing_about_a_rate() -> None:
    # Seen on the H200: another user's request was sent 2 ms before this decode's last token, and the
    # last 32 chunks arrived in one burst; counting that overlap reported 14000 tokens/s "inside".
    times = [10.0 * i for i in range(200)] + [1990 + 0.05 * i for i in range(1, 33)]
    decoding = rec("a", "0", -100, times)
    figure = decode_stall.stall(decoding, [rec("b", "1", 1989.0, [2500.0])])
    assert figure is not None and figure.time_inside_s == 0 and figure.rate_inside is None
    longer = decode_stall.stall(decoding, [rec("b", "1", 1500.0, [2500.0])])
    assert longer is not None and longer.time_inside_s == pytest.approx(0.4916, abs=0.01)
