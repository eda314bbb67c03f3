"""The many-users check's parameters (`[checks.throughput]`): closed-loop levels, open-loop rates, the SLO
search and what a level must meet."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .param_types import MAX_TOKENS_PER_PROMPT, Strict, Tokens


class SloParams(Strict):
    """What a level must meet in the SLO search (docs/metrics.md, "SLO search"): TTFT and TPOT percentiles
    over its successful requests, and the share of its requests that are goodput (within
    `ttft_slo_s`/`tpot_slo_s`, every successful one where neither is set). At least one."""

    ttft_p50_s: float | None = Field(None, gt=0, le=24 * 3600)
    ttft_p90_s: float | None = Field(None, gt=0, le=24 * 3600)
    ttft_p99_s: float | None = Field(None, gt=0, le=24 * 3600)
    tpot_p50_s: float | None = Field(None, gt=0, le=3600)
    tpot_p90_s: float | None = Field(None, gt=0, le=3600)
    tpot_p99_s: float | None = Field(None, gt=0, le=3600)
    goodput_fraction: float | None = Field(None, gt=0, le=1)
    # A percentile limit is met when the upper end of the percentile's 95% interval is within it and broken
    # when the lower end is over it ("upper_bound"); between the two a level is undetermined and runs on,
    # fresh requests, until one of them holds or it reaches max_requests or max_s (then it is reported
    # undetermined, never broken). "estimate" judges the point estimate alone, said as such.
    judged_by: Literal["upper_bound", "estimate"] = "upper_bound"
    max_requests: int = Field(4096, ge=1, le=10_000_000)  # a level's measured requests, all rounds
    max_s: float = Field(600.0, gt=0, le=7 * 24 * 3600)  # a level's time, all rounds (MLPerf: 600 s a point)

    @model_validator(mode="after")
    def _some_limit(self) -> SloParams:
        if not self.limits() and self.goodput_fraction is None:
            raise ValueError(
                "slo sets no limit; give ttft_p99_s (or _p50_s, _p90_s), tpot_p99_s (...) or goodput_fraction"
            )
        return self

    def limits(self) -> dict[str, float]:
        """The percentile limits set, by key: {"ttft_p99_s": 0.25}."""
        keys = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s")
        return {key: getattr(self, key) for key in keys if getattr(self, key) is not None}


class AskParams(Strict):
    """Recall under load: `questions` fresh documents of `length` tokens, a fact planted in each, asked one at
    a time alone and then as many more while the level's users keep up their load, each answer scored."""

    length: Tokens = Field(1024, description="Each question's document, in tokens.")
    questions: int = Field(4, ge=1, le=256, description="Questions alone, and as many under load.")
    max_tokens: int = Field(32, ge=1, le=4096, description="Each answer's budget.")


class ThroughputParams(Strict):
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
    # prose, code, or a .jsonl of {"prompt": ...}, {"messages": [...]} or ShareGPT lines, or a ShareGPT .json
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
    # Recall under load: retrieval questions asked alone, then inside the load at the level the search
    # found (else the highest of `levels`), scored (the many-users check's recall under load).
    ask: AskParams | None = None
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
        asked = 2 * self.ask.questions if self.ask is not None else 0  # the load beside them is not counted
        return (
            closed
            + sum(self.requests_at(rate) for rate in self.rates)
            + relative
            + self._search_count()
            + asked
        )

    def _search_count(self) -> int:
        """The search's requests when known: users doubling from the first level (what bracketing probes;
        bisection adds some), less the levels `levels` measures already (the search reads them back), or
        `search_probes` rates of `requests_per_rate`. A guess: the bar's total is set to what ran at the
        end."""
        if self.search == "rate" and self.requests_per_rate:
            return (self.search_probes + self.search_repeats - 1) * self.requests_per_rate
        if self.search != "users" or self.requests_per_user is None:
            return 0
        low, high = self.search_bounds()
        users = [int(low * 2**k) for k in range(self.search_probes) if low * 2**k <= (high or low)]
        return sum(u for u in users if u not in self.levels) * (self.requests_per_user + self.warmup_requests)

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
        if value not in ("prose", "code") and not value.endswith((".jsonl", ".json")):
            raise ValueError(
                f"source {value!r}: use prose, code, or the path of a .jsonl or .json file of prompts (a "
                "ShareGPT .json as vllm bench serve reads it, or prompt/messages/conversations lines)"
            )
        return value
