"""Returning users' arithmetic: one return's verdict, the planner's forecast, llama-server's cache flags."""

from __future__ import annotations

import pytest

from ctxbench.checks.returning import verdict_of
from ctxbench.checks.returning.forecast import returning_forecast
from ctxbench.checks.returning.params import ReturningParams
from ctxbench.engines.llamacpp import DEFAULT_CACHE_RAM_MIB, cache_settings


def test_a_return_is_cached_recomputed_or_in_between() -> None:
    assert verdict_of(950, 1000, ok=True) == "cached"
    assert verdict_of(50, 1000, ok=True) == "recomputed"
    assert verdict_of(0, 1000, ok=True) == "recomputed"
    assert verdict_of(None, 1000, ok=True) == "not reported"  # the engine says nothing of its cache
    assert verdict_of(500, 1000, ok=True) == "partly cached"
    assert verdict_of(1000, 1000, ok=False) == "failed"


def forecast(**overrides: object):
    given = dict(
        conversations=4,
        conversation_tokens=1000,
        filler_requests=4,
        filler_tokens=1000,
        slots=2,
        host_cache_bytes=None,
        kv_bytes_per_token=100.0,
    )
    return returning_forecast(**{**given, **overrides})


def test_fillers_that_take_every_slot_push_every_conversation_to_the_host_cache() -> None:
    f = forecast()
    assert (f.in_slots, f.from_host_cache, f.recomputed) == (0, 4, 0)
    assert f.pushed_tokens == 4 * 1000 + 2 * 1000  # the last 2 fillers are still in the slots
    assert f.host_cache_tokens is None


def test_a_host_cache_too_small_keeps_only_the_newest_conversations() -> None:
    # room for 4,500 tokens; the two fillers saved last take 2,000; two conversations fit beside them
    f = forecast(host_cache_bytes=4500 * 100.0)
    assert (f.in_slots, f.from_host_cache, f.recomputed) == (0, 2, 2)
    assert forecast(host_cache_bytes=0.0).recomputed == 4  # --cache-ram 0: nothing is saved


def test_fewer_fillers_than_slots_leave_the_newest_conversations_in_theirs() -> None:
    f = forecast(filler_requests=1, slots=3)
    assert (f.in_slots, f.from_host_cache, f.recomputed) == (2, 2, 0)


def test_llama_server_s_slots_and_host_cache_come_from_its_command() -> None:
    assert cache_settings(["llama-server", "--parallel", "4"]) == (4, DEFAULT_CACHE_RAM_MIB * float(1 << 20))
    assert cache_settings(["llama-server", "-np", "2", "--cache-ram", "0"]) == (2, 0.0)
    assert cache_settings(["llama-server", "-cram", "-1"]) == (1, None)


def test_the_schema_counts_the_requests_and_refuses_a_short_follow_up() -> None:
    assert ReturningParams(conversations=3, filler_requests=5).request_count() == 17
    with pytest.raises(ValueError, match="follow_up_tokens"):
        ReturningParams(follow_up_tokens=1)
