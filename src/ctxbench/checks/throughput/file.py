"""`throughput.json`: closed-loop levels by user count, open-loop rates by offered rate, the SLO search and
recall under load, rewritten after each unit (frozen figures: store/check_files.py says how they are read)."""

from __future__ import annotations

from typing import Any, ClassVar

from ...store.check_files import CheckFile, Stats, _Open


class Steady(_Open):
    output_tokens_per_s: float | None
    cut_s: float
    window_s: float
    ttft_s: Stats


class Load(_Open):
    """The figures of a closed-loop level or an open-loop rate over its measured requests."""

    requests: int
    failed: int
    output_tokens: int
    window_s: float
    requests_per_s: float | None
    output_tokens_per_s: float | None
    goodput_requests: int
    goodput_per_s: float | None
    ttft_s: Stats
    tpot_s: Stats
    request_ids: list[str] = []  # the measured requests, in `requests.jsonl`
    # judged against an SLO (`slo_search.judge`): met, broke or undetermined after `rounds` rounds, and what
    # stopped an undetermined one ("max_requests = 4096"); absent without an SLO
    verdict: str | None = None
    rounds: int = 1
    stopped_by: str | None = None


class Level(Load):
    decode_rate: Stats
    queue_s: Stats
    tokens_per_chunk: Stats
    steady: Steady | None = None  # None: a level measured before steady state was computed, or without one


class Rate(_Open):
    """An open-loop rate: measured, or skipped (`skipped` says why; no figures)."""

    skipped: str | None = None
    saturated: bool | None = None
    client_behind: bool = False
    behind_threshold_s: float | None = None
    sustained_per_s: float | None = None
    realised_per_s: float | None = None
    lateness_p50_s: float | None = None
    lateness_p99_s: float | None = None
    lag_growth: float | None = None
    requests: int = 0
    failed: int = 0
    output_tokens: int = 0
    window_s: float = 0.0
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    goodput_requests: int = 0
    goodput_per_s: float | None = None
    ttft_s: Stats = Stats()
    tpot_s: Stats = Stats()
    verdict: str | None = None  # as a closed-loop level's (`Load`)
    rounds: int = 1
    stopped_by: str | None = None


class ThroughputFile(CheckFile):
    """Many users: closed-loop levels by user count, open-loop rates by offered rate, the SLO search.
    Rewritten after each level and rate, so a resumed run reads back what it already measured."""

    FILE: ClassVar[str] = "throughput.json"
    spec: dict[str, Any] = {}  # the check's parameters as it ran
    levels: dict[str, Level] = {}  # "users" -> figures
    rates: dict[str, Rate] = {}  # "rate" (as %g) -> figures
    repeats: dict[str, Any] = {}  # a search's repeats, by unit (read back only by the search itself)
    search: dict[str, Any] | None = None  # the SLO search (slo_search.search_text reads it)
    saturated_at: float | None = None
    capacity_requests_per_s: float | None = None
    rates_skipped: str | None = None

    def levels_sorted(self) -> list[tuple[int, Level]]:
        return sorted((int(users), level) for users, level in self.levels.items())

    def rates_sorted(self) -> list[tuple[float, Rate]]:
        return sorted((float(rate), line) for rate, line in self.rates.items())
