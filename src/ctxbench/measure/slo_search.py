"""The SLO search: the highest level (closed-loop users, or an open-loop rate) whose figures meet an SLO,
found in a bounded number of levels, each one measured and recorded like any other level.

The rule (docs/metrics.md, "SLO search"):
- a level meets the SLO when its TTFT p99 <= `ttft_p99_s`, its TPOT p99 <= `tpot_p99_s` (both over its
  successful requests; by default the upper end of the p99's 95% confidence interval, so a level of fewer
  than 368 requests cannot meet a p99 limit; `judged_by = "estimate"` judges the point estimate) and its
  goodput share (goodput requests / requests) >= `goodput_fraction`, for the
  limits given; where no `goodput_fraction` is given a failed request breaks it; a level with no successful
  request breaks it; a saturated rate breaks it (its latencies grow with the length of the run);
- bracketing: the first level probed is `search_from`; while levels meet, the next is twice the last (up to
  `search_to`); when the first one breaks, the next is half of it (users down to 1);
- bisection: between the highest level met below the lowest level broken: users by the integer midpoint
  until the two are adjacent, rates by the geometric mean (3 significant figures) until broken / met
  <= 1 + `search_tolerance`;
- at most `search_probes` levels; a level already measured (a listed level, a resumed run) is not run
  again. Noise can make a level above a broken one meet: the bracket is always the lowest broken level and
  the highest met level below it, so the answer is never above a level that broke the SLO.
- the level found is run `search_repeats` times in all (fresh prompts each run); the search says in how
  many of them it met the SLO.

The decisions depend only on the recorded figures, so a resumed run replays the same probes and runs only
those it had not finished.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..config.load_params import SloParams, ThroughputParams
from .stats import Decision, decide, samples_for_upper, samples_to_decide

Limit = Literal[
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p90_s",
    "tpot_p99_s",
    "goodput_fraction",
    "failed",
    "saturated",
    "no_answer",
]
# each percentile limit: its figure in a level, and which percentile (0-1)
PERCENTILE_LIMITS: dict[Limit, tuple[str, str, float]] = {
    "ttft_p50_s": ("ttft_s", "p50", 0.5),
    "ttft_p90_s": ("ttft_s", "p90", 0.9),
    "ttft_p99_s": ("ttft_s", "p99", 0.99),
    "tpot_p50_s": ("tpot_s", "p50", 0.5),
    "tpot_p90_s": ("tpot_s", "p90", 0.9),
    "tpot_p99_s": ("tpot_s", "p99", 0.99),
}
_NAMES: dict[str, str] = {
    **{limit: f"{limit[:4].upper()} {limit[5:8]}" for limit in PERCENTILE_LIMITS},  # "TTFT p99"
    "goodput_fraction": "goodput share",
}


def limit_name(limit: str) -> str:
    """ "TTFT p99" for "ttft_p99_s"."""
    return _NAMES[limit]


@dataclass(frozen=True)
class Breach:
    """One limit a level broke: which, the level's figure and the limit (None where neither is a number)."""

    limit: Limit
    value: float | None = None
    bound: float | None = None
    samples: int | None = None  # recorded before "undetermined" was: a p99 with no upper bound, its requests
    low_end: bool = False  # the value is the percentile's 95% low end (judged by its interval)

    def text(self) -> str:
        if self.samples is not None:
            return (
                f"{_NAMES[self.limit]}: {self.samples} request(s) give no 95% upper bound "
                f"({samples_for_upper(0.99)} needed)"
            )
        if self.limit == "failed":
            return f"{self.value:g} request(s) failed"
        if self.limit == "saturated":
            return "saturated"
        if self.limit == "no_answer":
            return "no request answered"
        unit = "" if self.limit == "goodput_fraction" else " s"
        sign = "<" if self.limit == "goodput_fraction" else ">"
        judged = " (its 95% low end)" if self.low_end else ""
        return f"{_NAMES[self.limit]} {self.value:.3g}{unit}{judged} {sign} {self.bound:g}{unit}"


@dataclass(frozen=True)
class Undecided:
    """A percentile limit a level's requests could not judge yet: the limit lies inside its 95% interval (or
    an end is missing); `needed` is what the next round aims at (`stats.samples_to_decide`)."""

    limit: Limit
    low: float | None
    high: float | None
    bound: float
    samples: int
    needed: int

    def text(self) -> str:
        ends = ", ".join("too few" if end is None else f"{end:.3g}" for end in (self.low, self.high))
        return (
            f"{_NAMES[self.limit]} [{ends}] s around {self.bound:g} s from {self.samples} request(s) "
            f"(about {self.needed} would decide it)"
        )


@dataclass(frozen=True)
class Judgement:
    """A level against an SLO: met (every limit met), broke (a limit decidedly broken), or undetermined (none
    broken, some not decided by its requests); never "broke" for a limit its requests could not judge."""

    verdict: Decision
    breaches: list[Breach]
    undecided: list[Undecided]

    def needed(self) -> int:
        """The requests the level aims at next to decide every undecided limit (0: decided)."""
        return max((u.needed for u in self.undecided), default=0)

    def recorded(self) -> dict[str, Any]:
        """As a probe or repeat records it in `throughput.json`'s search."""
        return {
            "met": self.verdict == "met",
            "verdict": self.verdict,
            "breaches": [asdict(b) for b in self.breaches],
            "undecided": [asdict(u) for u in self.undecided],
        }


def judge(level: Mapping[str, Any], slo: SloParams) -> Judgement:
    """A level's figures (a `throughput.json` level or rate) against the SLO (docs/metrics.md, "SLO
    search")."""
    requests, failed = level["requests"], level["failed"]
    if requests - failed <= 0:
        return Judgement("broke", [Breach("no_answer")], [])
    out: list[Breach] = []
    undecided: list[Undecided] = []
    if level.get("saturated"):
        out.append(Breach("saturated"))
    for limit, (figure, name, q) in PERCENTILE_LIMITS.items():
        bound = getattr(slo, limit)
        figures = level[figure]
        value, interval = figures.get(name), figures.get(f"{name}_ci")
        if bound is None or value is None:
            continue
        if slo.judged_by == "estimate" or interval is None:  # (None: a level recorded before bounds)
            if value > bound:
                out.append(Breach(limit, value, bound))
            continue
        decided = decide((interval[0], interval[1]), bound)
        if decided == "broke":
            out.append(Breach(limit, interval[0], bound, low_end=True))
        elif decided == "undetermined":
            n = figures["n"]
            needed = samples_to_decide(n, q)
            undecided.append(Undecided(limit, interval[0], interval[1], bound, n, needed))
    if slo.goodput_fraction is not None:
        share = level["goodput_requests"] / requests
        if share < slo.goodput_fraction:
            out.append(Breach("goodput_fraction", share, slo.goodput_fraction))
    elif failed:
        out.append(Breach("failed", failed))
    verdict: Decision = "broke" if out else "undetermined" if undecided else "met"
    return Judgement(verdict, out, undecided)


def breaches(level: Mapping[str, Any], slo: SloParams) -> list[Breach]:
    """The limits a level's figures decidedly break; [] where it meets the SLO or is undetermined."""
    return judge(level, slo).breaches


def bracket(probes: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(highest level met below the lowest not met, lowest not met) from (level, met) pairs: a level that
    broke the SLO or stayed undetermined bounds the search from above alike (the answer is the highest level
    shown to meet), though only one that broke is ever said to have broken it."""
    broken = min((level for level, met in probes if not met), default=None)
    met = max(
        (level for level, ok in probes if ok and (broken is None or level < broken)),
        default=None,
    )
    return met, broken


def _round(by: str, value: float) -> float:
    return float(max(1, round(value))) if by == "users" else float(f"{value:.3g}")


def next_level(params: ThroughputParams, start: float, probes: Sequence[tuple[float, bool]]) -> float | None:
    """The next level to probe, or None when the search is over (see the module's rule)."""
    if not probes:
        return start
    return None if len(probes) >= params.search_probes else _following(params, probes)


def _following(params: ThroughputParams, probes: Sequence[tuple[float, bool]]) -> float | None:
    """The next level by the bracket alone, however many were probed."""
    by = params.search or "users"
    top = params.search_bounds()[1]
    met, broken = bracket(probes)
    tried = {level for level, _ in probes}
    if broken is None:
        assert met is not None
        following = _round(by, met * 2)
        following = min(following, top) if top is not None else following
        return None if following in tried else following
    if met is None:
        following = _round(by, broken / 2)
        return None if following in tried or following >= broken else following
    if by == "users":
        middle = float((int(met) + int(broken)) // 2)
    else:
        if broken / met <= 1 + params.search_tolerance:
            return None
        middle = _round(by, math.sqrt(met * broken))
    return None if middle in tried or not met < middle < broken else middle


def stopped_because(params: ThroughputParams, probes: Sequence[tuple[float, bool]]) -> str:
    met, broken = bracket(probes)
    if met is None and broken is None:
        return "no level was probed"
    if broken is None:
        return "every level probed met the SLO, up to the highest searched"
    if met is None:
        return "no level probed met the SLO"
    if _following(params, probes) is not None:
        return f"the {params.search_probes} probes were spent"
    return "the bracket closed"


Measure = Callable[[float, int], Awaitable[Mapping[str, Any]]]


async def search(params: ThroughputParams, start: float, measure: Measure) -> dict[str, Any]:
    """Probe levels by the rule, `measure(level, run)` giving a level's figures (run 0 the probe, 1.. the
    repeats; each level runs until the SLO decides it or its cap, `_Levels`); returns the search's part of
    `throughput.json`."""
    assert params.slo is not None and params.search is not None
    slo = params.slo
    probes: list[dict[str, Any]] = []
    pairs: list[tuple[float, bool]] = []
    while (level := next_level(params, start, pairs)) is not None:
        figures = await measure(level, 0)
        judged = judge(figures, slo)
        probes.append({"level": level, **judged.recorded(), "requests": figures["requests"]})
        pairs.append((level, judged.verdict == "met"))
    met, above = bracket(pairs)
    runs = [probe["met"] for probe in probes if probe["level"] == met]
    repeats: list[dict[str, Any]] = []
    if met is not None:  # the level found, repeated
        for run in range(1, params.search_repeats):
            figures = await measure(met, run)
            judged = judge(figures, slo)
            repeats.append({"run": run, **judged.recorded(), "requests": figures["requests"]})
            runs.append(judged.verdict == "met")
    first = {p["level"]: p for p in reversed(probes)}  # a level's first probe (a level is probed once)
    broken = min((p["level"] for p in probes if p["verdict"] == "broke"), default=None)
    return {
        "by": params.search,
        "slo": slo.model_dump(mode="json"),
        "start": start,
        "probes": probes,
        "met": met,
        # the level the search could not go past: it broke the SLO, or its requests could not decide it
        "above": above,
        "above_verdict": None if above is None else first[above]["verdict"],
        "above_by": [] if above is None else _why(first[above]),
        "broken": broken,
        "broken_by": [] if broken is None else first[broken]["breaches"],
        "undetermined": sorted(p["level"] for p in probes if p["verdict"] == "undetermined"),
        "stopped": stopped_because(params, pairs),
        "repeats": repeats,
        "met_runs": sum(runs),
        "runs": len(runs),
    }


def _why(probe: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(probe["undecided"] if probe["verdict"] == "undetermined" else probe["breaches"])


def plan_text(params: ThroughputParams) -> list[str]:
    """What the SLO asks of each level before anything runs (the dry run): the requests each judged percentile
    needs before a level can be shown to meet it, the cap of a level, and the search's longest duration."""
    slo = params.slo
    if slo is None:
        return []
    lines = []
    for limit, (_, _, q) in PERCENTILE_LIMITS.items():
        bound = getattr(slo, limit)
        if bound is None:
            continue
        lines.append(
            f"{_NAMES[limit]} <= {bound:g} s: a level is shown to meet it from {samples_for_upper(q)} "
            "requests (its 95% upper end), to break it once its low end passes the limit; until then it runs"
            if slo.judged_by == "upper_bound"
            else f"{_NAMES[limit]} <= {bound:g} s: judged by the estimate alone (judged_by = 'estimate')"
        )
    levels = len(params.levels) + len(params.rates) + len(params.rates_of_capacity)
    probes = params.search_probes + params.search_repeats - 1 if params.search else 0
    lines.append(
        f"each level stops undecided at max_requests = {slo.max_requests} or max_s = {slo.max_s:g} s "
        f"(then it is undetermined, never broken); {levels} listed level(s) and at most {probes} search "
        f"probe(s) and repeat(s): at most {(levels + probes) * slo.max_s / 3600:.2g} h of load"
    )
    return lines


def breach_text(breach: Mapping[str, Any]) -> str:
    """A recorded breach (`throughput.json`'s `search.broken_by`) or undecided limit in words."""
    return Undecided(**breach).text() if "needed" in breach else Breach(**breach).text()


def probe_text(probe: Mapping[str, Any]) -> str:
    """A recorded probe's verdict: "met", "broke: TTFT p99 ...", "undetermined: TTFT p99 [...] ..."."""
    verdict = probe.get("verdict") or ("met" if probe["met"] else "broke")  # (no verdict: recorded before)
    if verdict == "met":
        return "met"
    return f"{verdict}: " + "; ".join(breach_text(b) for b in _why({**probe, "verdict": verdict}))


def above_text(found: Mapping[str, Any], unit: str) -> tuple[float | None, str]:
    """The level above the answer and what it did: (level, "4 users broke it: ..." / "4 users undetermined:
    ..."); a search recorded before "undetermined" was names its lowest broken level."""
    if "above" in found:
        level, verdict, why = found["above"], found["above_verdict"], found["above_by"]
    else:
        level, verdict, why = found["broken"], "broke", found["broken_by"]
    if level is None:
        return None, "nothing probed broke it"
    reasons = "; ".join(breach_text(b) for b in why)
    said = "broke it" if verdict == "broke" else "undetermined"
    return level, f"{level:g}{unit} {said}: {reasons}"


def slo_text(slo: Mapping[str, Any]) -> str:
    """A recorded SLO (`search.slo`) in words: "TTFT p99 <= 2 s, goodput >= 0.9"."""
    parts = [f"{_NAMES[key]} <= {slo[key]:g} s" for key in PERCENTILE_LIMITS if slo.get(key) is not None]
    if slo.get("goodput_fraction") is not None:
        parts.append(f"goodput >= {slo['goodput_fraction']:g} of requests")
    judged = {
        "upper_bound": " (each percentile by its 95% interval)",
        "estimate": " (each percentile as estimated)",
    }
    if not any(slo.get(key) is not None for key in PERCENTILE_LIMITS):
        return ", ".join(parts)
    if slo.get("judged_by") == "upper_bound" and "max_requests" not in slo:  # recorded before undetermined
        judged["upper_bound"] = " (each p99 by its 95% upper bound)"
    return ", ".join(parts) + judged.get(slo.get("judged_by", ""), "")


def search_text(found: Mapping[str, Any]) -> str:
    """A recorded search (`throughput.json`'s `search`) in a line: the level found within the SLO, the level
    above it that broke it (or that its requests could not decide) and why, and with repeats in how many runs
    the level met it."""
    unit = " users" if found["by"] == "users" else " req/s"
    slo, met = slo_text(found["slo"]), found["met"]
    above, said = above_text(found, unit)
    if met is None:
        if found.get("above_verdict") == "undetermined":
            return f"none shown to meet {slo} ({said})"
        return f"none met {slo} (from {said.replace(' broke it', '', 1)})"
    runs = f"; met in {found['met_runs']}/{found['runs']} runs" if found["runs"] > 1 else ""
    return f"{met:g}{unit} within {slo} ({said}){runs}"
