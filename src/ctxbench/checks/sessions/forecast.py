"""The planner's forecast for agent sessions: how many concurrent sessions the cache keeps through their gaps,
by llama.cpp's slots and host prompt cache or by vLLM's shared block pool; the report sets the measured
cliff beside it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SessionsForecast:
    """How many concurrent sessions of a context the cache keeps through their gaps, and on what it rests."""

    session_tokens: int
    held: int | None  # None: no limit (every level fits)
    basis: str  # the cache it counted, in words

    def holds(self, sessions: int) -> bool:
        return self.held is None or sessions <= self.held


def sessions_forecast(
    *, session_tokens: int, slots: int, host_cache_bytes: float | None, kv_bytes_per_token: float
) -> SessionsForecast:
    """llama.cpp's model, as the returning-users check's forecast: each of `slots` keeps the last prompt it
    served, so up to `slots` sessions find theirs in a slot; a session pushed out of its slot is saved to the
    host prompt cache (`--cache-ram`; 0: none, None: no limit). A returning session takes the least recently
    used slot, whose prompt llama.cpp saves to the host cache *before* it looks its own up there (the engine's
    log, on an H100: "making room for prompt cache entry, removing oldest entry", then a miss), so a host
    cache that holds k whole sessions of `session_tokens` (the context a returning turn needs found: its
    previous prompt and reply) keeps k - 1 more sessions than the slots. Beyond that, sessions push each other
    out and their returning turns are prefilled again."""
    if host_cache_bytes is None:
        return SessionsForecast(session_tokens, None, f"{slots} slots, a host prompt cache without a limit")
    capacity = host_cache_bytes / kv_bytes_per_token if kv_bytes_per_token > 0 else 0.0
    extra = max(0, int(capacity // session_tokens) - 1) if session_tokens else 0
    cache = f"a {capacity:.0f}-token host prompt cache" if capacity else "no host prompt cache"
    return SessionsForecast(session_tokens, slots + extra, f"{slots} slots, {cache}")


def pool_sessions_forecast(*, session_tokens: int, kv_tokens: int, source: str) -> SessionsForecast:
    """A block pool shared by every request, its least recently used blocks evicted first (vLLM's prefix
    cache): whole sessions of `session_tokens` that fit in `kv_tokens` stay; one more, and each returning
    turn's allocation evicts the blocks of the session due next, so every turn misses. The shared system
    prompt's blocks are counted once per session (a bound a little low)."""
    held = kv_tokens // session_tokens if session_tokens else None
    return SessionsForecast(session_tokens, held, f"a {kv_tokens}-token KV cache ({source})")
