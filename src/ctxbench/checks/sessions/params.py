"""The agent-sessions check's parameters: its `[checks.sessions]` table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ...config.param_types import Strict, Tokens

GapShape = Literal["fixed", "exponential"]


class SessionsParams(Strict):
    """Agent sessions: at each level of `sessions`, that many conversations run at once over one shared system
    prompt (fresh per level), each turn adding `turn_tokens` of new input (tool output, user text) and a reply
    of `max_tokens`, with an idle gap before the next turn, until `turns` or `context`. A returning turn's
    cached tokens against its whole previous context say whether the session was kept through the gap; the
    first level whose returning turns fall under `hit_threshold` is the cache cliff (docs/campaigns.md)."""

    sessions: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        default=[1, 2, 4, 8],
        min_length=1,
        max_length=16,
        description="Concurrent sessions at each level, swept upward: 1,2,4,8.",
    )
    system_tokens: Tokens = Field(1024, description="The shared system prompt every session begins with.")
    turn_tokens: Tokens = Field(2048, description="New input each turn adds (tool output or user text).")
    turn_tokens_max: Tokens | None = Field(
        None, description="Each turn's new input drawn uniformly from turn_tokens to this (None: fixed)."
    )
    max_tokens: int = Field(64, ge=1, le=65536, description="Every reply, exactly (ignore_eos).")
    turns: int = Field(8, ge=2, le=1000, description="Turns per session at most (the first builds).")
    context: Tokens | None = Field(None, description="A session ends before a turn would pass this.")
    gap_s: float = Field(30.0, ge=0.0, le=86_400.0, description="Idle seconds before each next turn (mean).")
    gap: GapShape = Field("fixed", description="fixed or exponential gaps (mean gap_s).")
    time_scale: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="Every gap, stagger and trace time multiplied by this (0.1: ten times shorter).",
    )
    stagger_s: float | None = Field(
        None, ge=0.0, le=86_400.0, description="Seconds between sessions' starts (None: the gap / sessions)."
    )
    session_header: str | None = Field(
        None, description="A header naming each request's session, e.g. X-Session-ID (None: none)."
    )
    cache_salt: bool = Field(False, description="Send each session its own cache_salt (vLLM).")
    hit_threshold: float = Field(
        0.5, gt=0.0, le=1.0, description="A level holds while its returning turns find this share cached."
    )
    stop_after_cliff: bool = Field(True, description="Run no level above the first that does not hold.")
    trace: Path | None = Field(
        None,
        description="Recorded sessions to replay at their own times, instead of the levels (local JSONL).",
    )
    trace_format: Literal["sessions", "mooncake", "mlperf-agentic"] = Field(
        "sessions", description="sessions (ctxbench's), mooncake (sessions by hash ids), mlperf-agentic."
    )
    block_tokens: int = Field(512, ge=1, le=65536, description="mooncake: tokens a hash id stands for.")
    max_sessions: int | None = Field(
        None, ge=1, le=100_000, description="Replay the trace's first N sessions."
    )

    @model_validator(mode="after")
    def _upward(self) -> SessionsParams:
        if list(self.sessions) != sorted(set(self.sessions)):
            raise ValueError(f"sessions {self.sessions} must rise, each level once (1,2,4,8)")
        if self.turn_tokens_max is not None and self.turn_tokens_max < self.turn_tokens:
            raise ValueError(
                f"turn_tokens_max ({self.turn_tokens_max}) is under turn_tokens ({self.turn_tokens})"
            )
        return self

    def longest_turn(self) -> int:
        return self.turn_tokens_max or self.turn_tokens

    def planned_turns(self) -> int:
        """Turns a session sends at most: `turns`, or fewer where `context` ends it first."""
        if self.context is None:
            return self.turns
        per_turn = self.longest_turn() + self.max_tokens + 64  # a turn's template and question, roughly
        fits = (self.context - self.system_tokens) // per_turn
        return max(1, min(self.turns, fits))

    def longest_prompt(self) -> int:
        grown = self.system_tokens + self.planned_turns() * (self.longest_turn() + self.max_tokens + 64)
        return min(grown, self.context) if self.context else grown

    def request_count(self) -> int:
        """Requests at most (0 for a trace: the check counts them as it reads it)."""
        return 0 if self.trace is not None else sum(self.sessions) * self.planned_turns()
