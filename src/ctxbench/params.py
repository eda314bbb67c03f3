"""Each check's parameters, defaults and ranges: the one schema the campaign file's `[checks.*]` tables, the
ad-hoc commands' flags and the checks themselves use (a check's function takes its `*Params`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from .load_params import ThroughputParams
from .param_types import MAX_TOKENS_PER_PROMPT, Strict, Tokens, token_count
from .text.tasks import TASKS, TaskName, curve_count, curve_depths, listed_tasks


class ProbeParams(Strict):
    """Short questions alone and concurrently; `document_chars` adds one request that reads fresh prose."""

    max_tokens: int = Field(96, ge=1, le=65536, description="Output budget per request.")
    concurrency: int = Field(2, ge=1, le=1024, description="Concurrent streams in the second phase.")
    document_chars: int = Field(4000, ge=0, le=10_000_000)


class CapacityParams(Strict):
    """A prompt just under the server's limit (room for the reply and a margin), one `over_by_tokens` past."""

    output_tokens: int = Field(16, ge=1, le=65536)
    margin_tokens: int = Field(16, ge=0, le=65536)
    over_by_tokens: int = Field(256, ge=1, le=MAX_TOKENS_PER_PROMPT)


class NeedleParams(Strict):
    """A hidden fact in a fresh document at every length x depth, for each retrieval task."""

    task: Annotated[list[TaskName], BeforeValidator(listed_tasks)] = Field(
        default=["single"],
        min_length=1,
        max_length=len(TASKS),
        description=f"Retrieval tasks: {', '.join(TASKS)} (docs/campaigns.md says what each claims).",
    )
    distractors: int = Field(
        3, ge=1, le=64, description="multi_key: facts of the same form beside the one asked."
    )
    values: int = Field(3, ge=2, le=16, description="multi_value: values of the one key, all to come back.")
    hops: int = Field(4, ge=2, le=16, description="variable_tracking: assignments in the chain asked for.")
    # Set from `depths = "curve"` or a count: the report draws recall against depth, a line per length.
    depth_curve: bool = False
    lengths: list[Tokens] = Field(
        default_factory=list, max_length=64, description="Prompt lengths: 32K,128K,1M. Default: the limit."
    )
    depths: list[Annotated[float, Field(ge=0.0, le=1.0)]] = Field(
        default=[0.1, 0.5, 0.9],
        min_length=1,
        max_length=64,
        description="Needle depths in [0, 1], or curve / curve:N (evenly spaced, drawn as a curve).",
    )
    max_tokens: int = Field(32, ge=1, le=65536, description="Output budget for each answer.")
    # A model that fails the control fails the task, not the context (docs/validation.md).
    control: Annotated[int, BeforeValidator(token_count)] = Field(
        1024,
        ge=0,
        le=MAX_TOKENS_PER_PROMPT,
        description="The short-context control's length, asked before the grid at the same depths (0: none).",
    )
    # Depths for some lengths only, e.g. {"1M" = [0.5]}: one 1M prompt costs as much as many short ones.
    depths_at: dict[str, list[Annotated[float, Field(ge=0.0, le=1.0)]]] = Field(
        default_factory=dict, max_length=64
    )

    @model_validator(mode="before")
    @classmethod
    def _curve(cls, data: Any) -> Any:
        """`depths = "curve"`, `"curve:N"` or a count N is drawn as a curve (`_depths` makes the list)."""
        try:
            curve = isinstance(data, dict) and curve_count(data.get("depths")) is not None
        except ValueError:
            curve = False  # `_depths` says what is wrong, naming the key
        return {**data, "depth_curve": True} if curve else data

    @field_validator("depths", mode="before")
    @classmethod
    def _depths(cls, value: Any) -> Any:
        count = curve_count(value)
        return value if count is None else curve_depths(count)

    @field_validator("task")
    @classmethod
    def _tasks_once(cls, value: list[str]) -> list[str]:
        twice = sorted({t for t in value if value.count(t) > 1})
        if twice:
            raise ValueError(f"task lists {twice[0]!r} twice; list each task once")
        return value

    @field_validator("depths_at")
    @classmethod
    def _lengths_are_token_counts(cls, value: dict[str, list[float]]) -> dict[str, list[float]]:
        for key, depths in value.items():
            token_count(key)  # raises with the message naming the bad key
            if not depths:
                raise ValueError(f"depths_at[{key!r}] is empty; give at least one depth or drop the key")
        return value

    @model_validator(mode="after")
    def _depths_at_listed_lengths(self) -> NeedleParams:
        unknown = [key for key in self.depths_at if token_count(key) not in self.lengths]
        if unknown:
            raise ValueError(f"depths_at names {unknown[0]!r}, which is not one of lengths {self.lengths}")
        return self

    def depths_for(self, length: int) -> tuple[float, ...]:
        for key, depths in self.depths_at.items():
            if token_count(key) == length:
                return tuple(depths)
        return tuple(self.depths)

    def control_length(self) -> int | None:
        """The control's length, or None when there is none or the grid is no longer than it."""
        if not self.control or (self.lengths and self.control >= min(self.lengths)):
            return None
        return self.control

    def trial_count(self) -> int:
        """Requests over every task: a task asks one question per length x depth (multi_depth too: one
        document per length, a question per depth), the control first."""
        control = len(self.depths) if self.control_length() else 0
        return len(self.task) * (control + sum(len(self.depths_for(length)) for length in self.lengths))


class RampParams(Strict):
    """Conversations growing from `start` to `end` tokens over `turns` (geometric or linear), per users."""

    start: Tokens = Field(32 * 1024, description="Context of the first turn (8K, 32K...).")
    end: Tokens = Field(1024 * 1024, description="Context of the last turn.")
    turns: int = Field(10, ge=1, le=1000, description="Number of turns.")
    schedule: Literal["geometric", "linear"] = Field("geometric", description="geometric or linear.")
    max_tokens: int = Field(
        256, ge=1, le=65536, description="Output budget per reply (fact, then a summary)."
    )
    users: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default=[1, 2],
        min_length=1,
        max_length=16,
        description="Users settings to run in turn, e.g. 1,2 or 1,2,4.",
    )
    task: Literal["single", "multi_key", "non_literal"] = Field(
        "single", description="What each turn asks back: single, multi_key or non_literal (text/tasks.py)."
    )
    distractors: int = Field(
        3, ge=1, le=64, description="multi_key: facts of the same form beside the one asked."
    )
    stagger_s: float = Field(
        5.0,
        ge=0.0,
        le=3600.0,
        description="Seconds between users' starts.",
        json_schema_extra={"flag": "--stagger"},
    )
    on_failure: Literal["stop", "continue"] = Field(
        "stop", description="After a failed turn a user: stop or continue."
    )
    # every reply writes max_tokens (random weights stop anywhere): decode rates compare
    ignore_eos: bool = False

    @model_validator(mode="after")
    def _end_after_start(self) -> RampParams:
        if self.end < self.start:
            raise ValueError(f"end ({self.end}) is shorter than start ({self.start}); a ramp grows")
        return self


class QualityParams(Strict):
    """GSM8K accuracy, scored as lm-evaluation-harness does."""

    data: Path = Field(description="GSM8K test.jsonl (or a directory holding it); never downloaded.")
    samples: int = Field(100, ge=1, le=100_000, description="Problems to sample (seeded).")
    fewshot: int = Field(
        5, ge=0, le=64, description="Worked examples before each question (the file's last N)."
    )
    endpoint: Literal["chat", "completions"] = Field(
        "chat", description="chat or completions: they can differ by tens of points."
    )
    max_tokens: int = Field(
        512, ge=16, le=65536, description="Output budget per answer (generous: answers show working)."
    )
    concurrency: int = Field(8, ge=1, le=1024, description="Requests in flight at most.")


class TraceParams(Strict):
    """A Mooncake-format trace (JSONL: timestamp ms, input_length, output_length, hash_ids) replayed at its
    own times, its shared hash ids as shared prompt prefixes."""

    file: Path  # local, never downloaded
    block_tokens: int = Field(512, ge=1, le=65536)  # tokens a hash id stands for (Mooncake's traces: 512)
    time_scale: float = Field(1.0, gt=0, le=1000)  # offsets multiplied: 0.5 replays twice as fast
    max_requests: int | None = Field(None, ge=1, le=1_000_000)  # the first N requests of the trace
    ignore_eos: bool = True  # every reply writes the trace's output_length
    ttft_slo_s: float | None = Field(None, gt=0)
    tpot_slo_s: float | None = Field(None, gt=0)


class ReturningParams(Strict):
    """Conversations of `context` tokens are built and answered (and asked again at once), other users'
    fresh prompts pass through the server, and each conversation returns: its TTFT and cached tokens beside
    the immediate return's and a fresh prefill's of the same length say whether its context was kept,
    restored or recomputed."""

    conversations: int = Field(4, ge=1, le=1024)
    context: Tokens = 32 * 1024  # each conversation's first prompt
    follow_up_tokens: int = Field(64, ge=16, le=65536)  # the new question a return adds
    filler_requests: int = Field(8, ge=0, le=100_000)  # other users' fresh prompts between build and return
    filler_tokens: Tokens | None = None  # each filler prompt; None: `context`
    max_tokens: int = Field(32, ge=1, le=65536)  # every reply, exactly (ignore_eos)

    def request_count(self) -> int:
        return self.conversations * 4 + self.filler_requests  # build, immediate, return, fresh; fillers


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


FidelityPath = Literal["warm", "partial", "restored", "load"]


class FidelityParams(Strict):
    """Does the cache return the same answer? At each length, one fresh document asked greedily with the
    engine's log-probabilities: computed cold twice (the engine's own noise), then served warm (the same
    prompt, its prefix cached), partly cached (a different question over the same document) and cold among
    `load_users` other requests; each compared token by token with its cold answer (docs/metrics.md, "Cache
    fidelity"). `restored`: the same prompt again after `evict_requests` other prompts of the same length
    pushed it out of the slots, so that it comes back from a second tier where the engine has one (llama.cpp's
    host-RAM prompt cache, `--cache-ram`; vLLM's CPU offload), else is recomputed (its cached tokens say)."""

    lengths: list[Tokens] = Field(
        default=[1024], min_length=1, max_length=16, description="Prompt lengths, one fresh document each."
    )
    max_tokens: int = Field(32, ge=1, le=4096, description="Greedy tokens compared per answer.")
    top_logprobs: int = Field(5, ge=1, le=20, description="Alternatives recorded per token.")
    paths: list[FidelityPath] = Field(
        default=["warm", "partial", "restored", "load"],
        min_length=1,
        description="Ways of serving the prompt compared with its cold one: warm, partial, restored, load.",
    )
    evict_requests: int = Field(2, ge=1, le=1024, description="Other prompts sent before the restored path.")
    load_users: int = Field(3, ge=1, le=256, description="Other fresh requests beside the load path's.")
    # The largest |difference| of a chosen token's log-probability that still reads as the same answer: the
    # last prompt token recomputed alone instead of inside a prefill batch moves it (llama.cpp CPU 0.005,
    # CUDA 0.042 warm and 0.057 partial at 250K); docs/metrics.md says how it was measured.
    drift_tolerance: float = Field(
        0.1,
        gt=0,
        le=10,
        description="Largest change of a chosen token's log-probability that reads as the same.",
    )

    def request_count(self) -> int:
        per_length = 2 + ("warm" in self.paths) + 2 * ("partial" in self.paths)
        per_length += (1 + self.evict_requests) if "restored" in self.paths else 0
        per_length += (1 + self.load_users) if "load" in self.paths else 0
        return per_length * len(self.lengths)


class Checks(Strict):
    """Each check runs when its table is present; `check = false` in a deployment's overrides skips it."""

    probe: ProbeParams | None = None
    capacity: CapacityParams | None = None
    needle: NeedleParams | None = None
    ramp: RampParams | None = None
    throughput: ThroughputParams | None = None
    trace: TraceParams | None = None
    returning: ReturningParams | None = None
    sessions: SessionsParams | None = None
    fidelity: FidelityParams | None = None
    quality: QualityParams | None = None


# The checks' table names, as `Checks` lists them (a new check is one field there).
CHECK_NAMES: tuple[str, ...] = tuple(Checks.model_fields)
