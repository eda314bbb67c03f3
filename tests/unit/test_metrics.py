"""Metric formulas on hand-built records with fixed clocks (stamps in ns)."""

from __future__ import annotations

import numpy as np
import pytest

from ctxbench.measure import metrics
from ctxbench.records import Chunk, RequestError, RequestRecord, Usage

MS = 1_000_000


def record(
    chunk_ms: list[float],
    *,
    completion: int | None = None,
    sent_ms: float = 0,
    end_ms: float | None = None,
    enqueued_ms: float = 0,
    error: RequestError | None = None,
    reasoning_first: bool = False,
) -> RequestRecord:
    chunks = tuple(
        Chunk(
            arrived_ns=int(t * MS),
            text="" if (reasoning_first and i == 0) else "x",
            reasoning="think" if (reasoning_first and i == 0) else "",
        )
        for i, t in enumerate(chunk_ms)
    )
    return RequestRecord(
        request_id="r",
        endpoint="chat",
        url="http://127.0.0.1:1/v1/chat/completions",
        model="m",
        request_bytes=10,
        enqueued_ns=int(enqueued_ms * MS),
        sent_ns=int(sent_ms * MS),
        end_ns=int((end_ms if end_ms is not None else (chunk_ms[-1] if chunk_ms else sent_ms)) * MS),
        chunks=chunks,
        usage=None if completion is None else Usage(prompt_tokens=100, completion_tokens=completion),
        error=error,
    )


def test_ttft_is_send_to_first_chunk_with_text() -> None:
    r = record([250, 260, 270], completion=3, sent_ms=50, enqueued_ms=10)
    assert metrics.ttft_s(r) == pytest.approx(0.200)
    assert metrics.queue_s(r) == pytest.approx(0.040)


def test_reasoning_text_counts_as_generated_for_ttft() -> None:
    r = record([100, 300], completion=2, reasoning_first=True)
    assert metrics.ttft_s(r) == pytest.approx(0.100)


def test_decode_rate_excludes_the_first_token_and_the_stream_tail() -> None:
    # 11 tokens, first at 100 ms, last at 600 ms; the stream ends 400 ms later (usage, [DONE]).
    r = record([100 + 50 * i for i in range(11)], completion=11, end_ms=1000)
    assert metrics.decode_rate(r) == pytest.approx(10 / 0.5)
    # vLLM's TPOT divides (E2E - TTFT) instead, so it includes the tail.
    assert metrics.tpot_s(r) == pytest.approx((1.0 - 0.1) / 10)


def test_output_tokens_fall_back_to_chunks_and_say_so() -> None:
    r = record([100, 200, 300])
    assert metrics.output_tokens(r) == metrics.TokenCount(3, "chunks")
    assert metrics.output_tokens(record([100, 200], completion=5)) == metrics.TokenCount(5, "usage")


def test_itl_knows_tokens_per_chunk_only_when_counts_match() -> None:
    assert [g.tokens for g in metrics.itl(record([0, 10, 30], completion=3))] == [1, 1]
    assert [g.tokens for g in metrics.itl(record([0, 10, 30], completion=6))] == [None, None]
    assert [g.gap_s for g in metrics.itl(record([0, 10, 30], completion=3))] == pytest.approx([0.010, 0.020])


def test_one_token_answers_have_no_decode_rate() -> None:
    r = record([100], completion=1)
    assert metrics.decode_rate(r) is None and metrics.tpot_s(r) is None


@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(q: float) -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3]
    assert metrics.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_summary_counts_failures_without_measuring_them() -> None:
    failed = record([], error=RequestError(kind="timeout", message="t"))
    ok = record([100, 200, 300], completion=3)
    summary = metrics.summarize([ok, failed])
    assert (summary.requests, summary.failed) == (2, 1)
    assert summary.ttft_s.n == 1 and summary.ttft_s.p50 == pytest.approx(0.1)
    assert summary.output_tokens_source == frozenset({"usage"})


def test_goodput_counts_only_successful_requests_within_every_slo() -> None:
    fast = record([100, 110, 120], completion=3, sent_ms=0)  # TTFT 0.1 s, TPOT 0.01 s
    slow_start = record([900, 910, 920], completion=3, sent_ms=0)  # TTFT 0.9 s
    slow_decode = record([100, 400, 700], completion=3, sent_ms=0)  # TPOT 0.3 s
    failed = record([], sent_ms=0, end_ms=50, error=RequestError(kind="http_status", message="500"))
    records = [fast, slow_start, slow_decode, failed]
    assert [metrics.meets_slo(r, 0.5, 0.05) for r in records] == [True, False, False, False]
    figures = metrics.throughput(records, ttft_slo_s=0.5, tpot_slo_s=0.05)
    assert figures.requests == 4 and figures.failed == 1 and figures.goodput_requests == 1
    assert figures.window_s == pytest.approx(0.92)  # first send (0) -> last end (920 ms)
    assert figures.output_tokens == 9 and figures.output_tokens_per_s == pytest.approx(9 / 0.92)
    assert figures.goodput_per_s == pytest.approx(1 / 0.92) and figures.requests_per_s == pytest.approx(
        3 / 0.92
    )
    assert metrics.throughput(records).goodput_requests == 3  # no SLO: every success counts


def test_tokens_per_chunk_shows_bursts_and_acceptance_comes_from_counters() -> None:
    assert metrics.tokens_per_chunk(record([10, 20], completion=8)) == 4.0  # 8 tokens in 2 chunks
    assert metrics.tokens_per_chunk(record([10, 20, 30], completion=3)) == 1.0
    rate, per_step = metrics.spec_acceptance(
        {"spec_draft_tokens": 40, "spec_accepted_tokens": 30, "spec_drafts": 10}
    )
    assert rate == pytest.approx(0.75) and per_step == pytest.approx(3.0)
    assert metrics.spec_acceptance({"prompt_tokens": 5}) == (None, None)


def test_chunks_read_together_share_a_stamp_and_only_the_last_of_them_is_its_own() -> None:
    # Ten tokens every 50 ms from 100 ms; the client was held up until 300 ms: tokens 0-4 came in one read.
    r = record([300.0] * 5 + [350, 400, 450, 500, 550], completion=10)
    assert metrics.own_stamps(r) == [4, 5, 6, 7, 8, 9]
    assert metrics.shared_stamp_events(r) == 4
    # The window starts at token 4 (300 ms), the first stamp that is its own: 5 tokens in 250 ms.
    assert metrics.decode_rate(r) == pytest.approx(5 / 0.250)
    assert [(round(g.gap_s, 3), g.tokens) for g in metrics.itl(r)] == [(0.05, 1)] * 5


def test_a_stream_read_in_one_go_has_no_decode_rate_and_no_gaps() -> None:
    r = record([400] * 8, completion=8)
    assert metrics.decode_rate(r) is None
    assert metrics.itl(r) == []


def test_a_held_up_read_mid_stream_leaves_the_rate_as_measured() -> None:
    r = record([100, 150, 300, 300, 300, 350, 400], completion=7)
    assert metrics.own_stamps(r) == [0, 1, 4, 5, 6]
    assert metrics.decode_rate(r) == pytest.approx(6 / 0.300)
    assert [g.tokens for g in metrics.itl(r)] == [1, 3, 1, 1]


def test_ttft_counts_a_first_token_without_visible_text_and_first_text_is_apart() -> None:
    r = record([100, 150, 400], completion=3)
    r = r.model_copy(update={"chunks": (r.chunks[0].model_copy(update={"text": ""}), *r.chunks[1:])})
    assert metrics.ttft_s(r) == pytest.approx(0.100)
    assert metrics.first_text_s(r) == pytest.approx(0.150)


def test_a_reply_whose_events_cannot_carry_its_tokens_has_no_timing() -> None:
    # The case: 64 tokens, only two events seen 0.88 ms apart (the empty ones were dropped).
    r = record([100, 100.88], completion=64, end_ms=486)
    reason = metrics.implausible(r)
    assert reason is not None and "64 output tokens over 2 token event(s)" in reason
    assert metrics.decode_rate(r) is None and metrics.ttft_s(r) is None and metrics.itl(r) == []
    # The same reply with an event per token is measured: 63 tokens over 0.385 s
    every = record([100 + 385 * i / 63 for i in range(64)], completion=64, end_ms=486)
    assert metrics.implausible(every) is None
    assert metrics.decode_rate(every) == pytest.approx(63 / 0.385)


def test_a_first_token_after_the_last_byte_cannot_be_true() -> None:
    r = record([500, 600], completion=2, end_ms=400)
    assert metrics.implausible(r) == "first token after the stream's last byte"
    assert metrics.ttft_s(r) is None and metrics.decode_rate(r) is None
    assert metrics.summarize([r]).ttft_s.n == 0


def test_ttft_splits_into_the_engines_prefill_and_the_rest() -> None:
    # Seen at 1M on an H100: a question over the cached 1M document, TTFT 1.73 s, the engine's prefill 0.17 s.
    from ctxbench.render.tables import COLUMNS, request_row, ttft_split_note

    asked = record([1730, 1740, 1750], completion=3).model_copy(
        update={"server_timings": {"prompt_ms": 170.0}}
    )
    assert metrics.engine_prompt_s(asked) == pytest.approx(0.17)
    assert metrics.ttft_outside_prefill_s(asked) == pytest.approx(1.56)
    row = dict(zip(COLUMNS, request_row(asked), strict=True))
    assert (row["TTFT s"], row["engine prefill s"], row["rest of TTFT s"]) == ("1.730", "0.170", "1.560")
    note = " ".join(ttft_split_note([asked]))
    assert "1 request(s) spent longer outside the engine's prefill" in note and "TTFT 1.73 s" in note
    # an engine that does not say: not reported, never 0, and no note
    plain = record([1730, 1740], completion=2)
    row = dict(zip(COLUMNS, request_row(plain), strict=True))
    assert row["engine prefill s"] == row["rest of TTFT s"] == "not reported"
    assert ttft_split_note([plain]) == []
    # a rest shorter than the prefill, or than half a second, is no news
    quick = record([300, 310], completion=2).model_copy(update={"server_timings": {"prompt_ms": 100.0}})
    assert metrics.ttft_outside_prefill_s(quick) == pytest.approx(0.2) and ttft_split_note([quick]) == []


def test_a_table_cell_stays_on_one_line_whatever_the_answer_holds() -> None:
    # a random-weight model answered "6ark 1837\x1c..." in a demo run: str.splitlines (and Markdown readers)
    # end a line there, and the requests table lost a column in that row
    from ctxbench.render.tables import cell, markdown_table

    answer = "a|b\rc\x1cd\x85e\u2028f\ng"
    assert cell(answer) == "a\\|b c d e f g"
    table = markdown_table([["x", answer]], ["id", "answer"])
    assert len(table.splitlines()) == 3
