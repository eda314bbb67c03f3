"""The planner's forecast for returning users: where N conversations that come back after other users'
traffic should find their context, by llama.cpp's cache model; the report sets it beside the measurement."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReturnForecast:
    """Where N returning conversations should find their context (llama.cpp's model, below)."""

    in_slots: int  # still in the slot that served them
    from_host_cache: int  # pushed out of their slot, still in the host prompt cache
    recomputed: int
    host_cache_tokens: float | None  # None: no limit
    pushed_tokens: int  # prompt tokens saved to the host cache before the first return


def returning_forecast(
    *,
    conversations: int,
    conversation_tokens: int,
    filler_requests: int,
    filler_tokens: int,
    slots: int,
    host_cache_bytes: float | None,
    kv_bytes_per_token: float,
) -> ReturnForecast:
    """llama.cpp's model: a slot keeps the last prompt it served; a request that finds no slot holding its
    prefix takes the least recently used one, and the prompt it pushes out is saved to the host prompt
    cache (`--cache-ram`, least recently used out first; 0: none, None: no limit). Conversations are built
    one after another, then `filler_requests` fresh prompts pass, then the conversations return: those the
    fillers did not push out are still in slots; of the rest, the newest that fit in the host cache beside
    the fillers' prompts are restored, the others recomputed."""
    in_slots = min(conversations, max(0, slots - filler_requests))
    pushed_out = conversations - in_slots
    saved_fillers = max(0, filler_requests - slots) * filler_tokens  # fillers still in slots are not saved
    pushed = pushed_out * conversation_tokens + saved_fillers
    if host_cache_bytes is None:
        host, capacity = pushed_out, None
    else:
        capacity = host_cache_bytes / kv_bytes_per_token if kv_bytes_per_token > 0 else 0.0
        room = max(0.0, capacity - saved_fillers)  # the fillers were saved last: the newest entries stay
        host = min(pushed_out, int(room // conversation_tokens)) if conversation_tokens else pushed_out
    return ReturnForecast(in_slots, host, pushed_out - host, capacity, pushed)
