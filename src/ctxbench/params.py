"""Each check's parameters, defaults and ranges: the one schema the campaign file's `[checks.*]` tables, the
ad-hoc commands' flags and the checks themselves use (a check's function takes its `*Params`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

MAX_TOKENS_PER_PROMPT = 1 << 24  # 16M: beyond any model's window; a typo like 1000M is caught here
_SUFFIXES = {"k": 1024, "m": 1024 * 1024}


def token_count(value: Any) -> int:
    """`8192`, `"8K"` (8192), `"1M"` (1048576), `"1.5K"`: context sizes count in powers of two."""
    if isinstance(value, bool):
        raise ValueError("a token count is a number or a string like '8K' or '1M', not true/false")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        cleaned = value.strip().lower()
        try:
            if cleaned and cleaned[-1] in _SUFFIXES:
                return int(float(cleaned[:-1]) * _SUFFIXES[cleaned[-1]])
            return int(cleaned)
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not a token count; write 8192, '8K' or '1M'")


Tokens = Annotated[int, BeforeValidator(token_count), Field(ge=1, le=MAX_TOKENS_PER_PROMPT)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProbeParams(_Strict):
    """Short questions alone and concurrently; `document_chars` adds one request that reads fresh prose."""

    max_tokens: int = Field(96, ge=1, le=65536, description="Output budget per request.")
    concurrency: int = Field(2, ge=1, le=1024, description="Concurrent streams in the second phase.")
    document_chars: int = Field(4000, ge=0, le=10_000_000)


class CapacityParams(_Strict):
    """A prompt just under the server's limit (room for the reply and a margin), one `over_by_tokens` past."""

    output_tokens: int = Field(16, ge=1, le=65536)
    margin_tokens: int = Field(16, ge=0, le=65536)
    over_by_tokens: int = Field(256, ge=1, le=MAX_TOKENS_PER_PROMPT)


class NeedleParams(_Strict):
    """A hidden fact in a fresh document at every length x depth."""

    lengths: list[Tokens] = Field(
        default_factory=list, max_length=64, description="Prompt lengths: 32K,128K,1M. Default: the limit."
    )
    depths: list[Annotated[float, Field(ge=0.0, le=1.0)]] = Field(
        default=[0.1, 0.5, 0.9], min_length=1, max_length=64, description="Needle depths in [0, 1]."
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
        control = len(self.depths) if self.control_length() else 0
        return control + sum(len(self.depths_for(length)) for length in self.lengths)


class RampParams(_Strict):
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


class SloParams(_Strict):
    """What a level must meet in the SLO search (docs/metrics.md, "SLO search"): TTFT and TPOT p99 over its
    successful requests, and the share of its requests that are goodput (within `ttft_slo_s`/`tpot_slo_s`,
    every successful one where neither is set). At least one."""

    ttft_p99_s: float | None = Field(None, gt=0, le=24 * 3600)
    tpot_p99_s: float | None = Field(None, gt=0, le=3600)
    goodput_fraction: float | None = Field(None, gt=0, le=1)

    @model_validator(mode="after")
    def _some_limit(self) -> SloParams:
        if self.ttft_p99_s is None and self.tpot_p99_s is None and self.goodput_fraction is None:
            raise ValueError("slo sets no limit; give ttft_p99_s, tpot_p99_s or goodput_fraction")
        return self


class ThroughputParams(_Strict):
    """Closed-loop users at each level; `prompt_tokens` counts the whole prompt, shared prefix included."""

    # Closed loop: each level's users send the next request when the previous ends ([] runs none).
    levels: list[Annotated[int, Field(ge=1, le=4096)]] = Field(default=[1, 4, 16, 64], max_length=32)
    # Open loop: requests arrive at each rate (requests/s) whatever the server does, lowest first; the
    # sweep stops after the first rate the server cannot keep up with (`saturation_lag_growth`).
    rates: list[Annotated[float, Field(gt=0, le=10_000)]] = Field(default_factory=list, max_length=32)
    # Or rates as multiples of the capacity the closed loop measured in this run (its best requests/s):
    # [0.25, 4] offers a quarter of it, then four times it, on any machine (needs `levels`, and
    # `requests_per_rate`, since the rates are known only once the closed loop ran).
    rates_of_capacity: list[Annotated[float, Field(gt=0, le=100)]] = Field(
        default_factory=list, max_length=32
    )
    arrival: Literal["poisson", "constant"] = "poisson"
    requests_per_rate: int | None = Field(None, ge=3, le=1_000_000)  # None: duration_s of arrivals a rate
    # Saturated: each request's lag (end - due) grows by more than this many seconds a second of the run.
    saturation_lag_growth: float = Field(0.1, gt=0, le=100)
    prompt_tokens: Tokens = 1024
    output_tokens: int = Field(256, ge=1, le=65536)
    requests_per_user: int | None = Field(None, ge=1, le=100_000)  # None: run each level for duration_s
    duration_s: float = Field(60.0, gt=0, le=24 * 3600)
    warmup_requests: int = Field(1, ge=0, le=1000)
    # prose, code, or a JSONL file of {"prompt": ...} or {"messages": [...]} lines
    source: str = Field("prose", max_length=4096)
    shared_prefix_tokens: int = Field(0, ge=0, le=MAX_TOKENS_PER_PROMPT)
    ttft_slo_s: float | None = Field(None, gt=0)
    tpot_slo_s: float | None = Field(None, gt=0)
    # The highest level that meets `slo`: users (closed loop) or rate (open loop), searched after `levels`
    # and `rates` by doubling from `search_from` until a level breaks it, then bisecting, at most
    # `search_probes` levels (docs/metrics.md, "SLO search"). The level found is run `search_repeats` times.
    slo: SloParams | None = None
    search: Literal["users", "rate"] | None = None
    search_from: float | None = Field(None, gt=0, le=10_000)  # users: 1; rate: 1/4 of the capacity measured
    search_to: float | None = Field(None, gt=0, le=10_000)  # the highest probed; users: 4096
    search_probes: int = Field(8, ge=2, le=32)
    search_tolerance: float = Field(0.1, gt=0, le=1)  # rate: stop when broken / met <= 1 + this
    search_repeats: int = Field(1, ge=1, le=20)
    ignore_eos: bool = True  # every request writes `output_tokens`, so levels compare like with like
    # The users of a level spread over this many client processes; their records come back to this one, which
    # writes them. One process's loop reaches each socket later the more streams it holds
    # (docs/performance.md).
    client_processes: int = Field(1, ge=1, le=256)
    # Or over this many Ray actors, on the nodes that can reach the server (needs `ctxbench run --ray`;
    # docs/distributed.md); 0: not over Ray.
    ray_actors: int = Field(0, ge=0, le=1024)
    # A level's actors wait this long for their CPUs (all at once) and as long again to start; then it fails.
    ray_wait_s: float = Field(600.0, gt=0, le=24 * 3600)

    def request_count(self) -> int:
        """Requests the check sends when that is known in advance (request counts, not durations)."""
        closed = (
            0
            if self.requests_per_user is None
            else sum(self.levels) * (self.requests_per_user + self.warmup_requests)
        )
        relative = len(self.rates_of_capacity) * (self.requests_per_rate or 0)
        return closed + sum(self.requests_at(rate) for rate in self.rates) + relative + self._search_count()

    def _search_count(self) -> int:
        """The search's requests when known: users doubling from the first level (what bracketing probes;
        bisection adds some), or `search_probes` rates of `requests_per_rate`. A guess: the bar's total is
        set to what ran at the end."""
        if self.search == "rate" and self.requests_per_rate:
            return (self.search_probes + self.search_repeats - 1) * self.requests_per_rate
        if self.search != "users" or self.requests_per_user is None:
            return 0
        low, high = self.search_bounds()
        users = [int(low * 2**k) for k in range(self.search_probes) if low * 2**k <= (high or low)]
        return sum(users) * (self.requests_per_user + self.warmup_requests)

    def rates_text(self) -> str:
        """`[0.5, 8] requests/s`, or `[0.25, 4] x the closed loop's capacity`."""
        if self.rates_of_capacity:
            return f"{list(self.rates_of_capacity)} x the closed loop's capacity"
        return f"{list(self.rates)} requests/s"

    def requests_at(self, rate: float) -> int:
        """Requests offered at one rate: `requests_per_rate`, else a `duration_s` of arrivals (at least 3)."""
        return self.requests_per_rate or max(3, round(rate * self.duration_s))

    @model_validator(mode="after")
    def _some_load(self) -> ThroughputParams:
        if not self.levels and not self.rates and not self.rates_of_capacity and not self.search:
            raise ValueError(
                "levels and rates are both empty; give closed-loop levels, open-loop rates, a search or both"
            )
        return self

    @model_validator(mode="after")
    def _search_has_slo(self) -> ThroughputParams:
        if (self.search is None) != (self.slo is None):
            raise ValueError(
                "search and slo go together: search = 'users' or 'rate' finds the highest level that meets "
                "slo = { ttft_p99_s = ..., tpot_p99_s = ..., goodput_fraction = ... }"
            )
        if self.search == "users" and any(
            v is not None and v != int(v) for v in (self.search_from, self.search_to)
        ):
            raise ValueError("search = 'users' counts users: search_from and search_to are whole numbers")
        if self.search == "rate" and self.search_from is None and not self.levels:
            raise ValueError(
                "search = 'rate' starts at search_from requests/s, or at a quarter of the closed loop's "
                "capacity: give search_from or levels"
            )
        low, high = self.search_bounds()
        if high is not None and high < low:
            raise ValueError(f"search_to ({high:g}) is below search_from ({low:g})")
        return self

    def search_bounds(self) -> tuple[float, float | None]:
        """(first level probed, highest probed): users from 1 up to 4096; a rate from `search_from` (0 here
        where it is a quarter of the capacity, known once the closed loop ran), its top only the probes'."""
        if self.search == "users":
            return (self.search_from or 1.0, self.search_to or 4096.0)
        return (self.search_from or 0.0, self.search_to)

    @model_validator(mode="after")
    def _capacity_to_scale(self) -> ThroughputParams:
        if self.rates_of_capacity and self.rates:
            raise ValueError("give rates (requests/s) or rates_of_capacity (multiples of it), not both")
        if self.rates_of_capacity and (not self.levels or self.requests_per_rate is None):
            raise ValueError(
                "rates_of_capacity scales the closed loop's capacity: it needs levels (to measure it) and "
                "requests_per_rate (a rate's requests, known before the rate is)"
            )
        return self

    @model_validator(mode="after")
    def _prefix_inside_prompt(self) -> ThroughputParams:
        if self.shared_prefix_tokens >= self.prompt_tokens:
            raise ValueError(
                f"shared_prefix_tokens ({self.shared_prefix_tokens}) must be below prompt_tokens "
                f"({self.prompt_tokens}), which counts the whole prompt"
            )
        return self

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        if value not in ("prose", "code") and not value.endswith(".jsonl"):
            raise ValueError(f"source {value!r}: use prose, code, or the path of a .jsonl file of prompts")
        return value


class QualityParams(_Strict):
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


class TraceParams(_Strict):
    """A Mooncake-format trace (JSONL: timestamp ms, input_length, output_length, hash_ids) replayed at its
    own times, its shared hash ids as shared prompt prefixes."""

    file: Path  # local, never downloaded
    block_tokens: int = Field(512, ge=1, le=65536)  # tokens a hash id stands for (Mooncake's traces: 512)
    time_scale: float = Field(1.0, gt=0, le=1000)  # offsets multiplied: 0.5 replays twice as fast
    max_requests: int | None = Field(None, ge=1, le=1_000_000)  # the first N requests of the trace
    ignore_eos: bool = True  # every reply writes the trace's output_length
    ttft_slo_s: float | None = Field(None, gt=0)
    tpot_slo_s: float | None = Field(None, gt=0)


class ReturningParams(_Strict):
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


class Checks(_Strict):
    """Each check runs when its table is present; `check = false` in a deployment's overrides skips it."""

    probe: ProbeParams | None = None
    capacity: CapacityParams | None = None
    needle: NeedleParams | None = None
    ramp: RampParams | None = None
    throughput: ThroughputParams | None = None
    trace: TraceParams | None = None
    returning: ReturningParams | None = None
    quality: QualityParams | None = None


# The checks' table names, as `Checks` lists them (a new check is one field there).
CHECK_NAMES: tuple[str, ...] = tuple(Checks.model_fields)
