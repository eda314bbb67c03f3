"""The agent-sessions check's arithmetic: its parameters, a level's hit ratio and verdict, the cliff, and the
planner's forecast of how many sessions the cache holds (the engine tests hold both to llama-server)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxbench.params import SessionsParams
from ctxbench.plan import pool_sessions_forecast, sessions_forecast
from ctxbench.sessions_file import SessionsFile, SessionTurn, level_summary


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
    # room for 3.5 sessions of 4096 tokens at 1 KiB a token: three more whole sessions beside the two slots
    roomy = sessions_forecast(
        session_tokens=4096, slots=2, host_cache_bytes=3.5 * 4096 * 1024, kv_bytes_per_token=1024
    )
    assert roomy.held == 5 and roomy.holds(5) and not roomy.holds(6)


def test_a_block_pool_holds_the_whole_sessions_that_fit() -> None:
    pool = pool_sessions_forecast(session_tokens=850, kv_tokens=1792, source="vLLM's log")
    assert pool.held == 2 and pool.holds(2) and not pool.holds(3) and "1792-token KV cache" in pool.basis
