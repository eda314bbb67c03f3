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
from .stats import samples_for_upper

Limit = Literal["ttft_p99_s", "tpot_p99_s", "goodput_fraction", "failed", "saturated", "no_answer"]
_NAMES = {"ttft_p99_s": "TTFT p99", "tpot_p99_s": "TPOT p99", "goodput_fraction": "goodput share"}


@dataclass(frozen=True)
class Breach:
    """One limit a level broke: which, the level's figure and the limit (None where neither is a number)."""

    limit: Limit
    value: float | None = None
    bound: float | None = None
    samples: int | None = None  # a p99 judged by its upper bound that has none: the requests it had

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
        return f"{_NAMES[self.limit]} {self.value:.3g}{unit} {sign} {self.bound:g}{unit}"


def breaches(level: Mapping[str, Any], slo: SloParams) -> list[Breach]:
    """The limits a level's figures (a `throughput.json` level or rate) break; [] where it meets the SLO."""
    requests, failed = level["requests"], level["failed"]
    if requests - failed <= 0:
        return [Breach("no_answer")]
    out = []
    if level.get("saturated"):
        out.append(Breach("saturated"))
    limits: tuple[tuple[Limit, float | None], ...] = (
        ("ttft_p99_s", slo.ttft_p99_s),
        ("tpot_p99_s", slo.tpot_p99_s),
    )
    for limit, bound in limits:
        figures = level[limit.removesuffix("_p99_s") + "_s"]
        value, interval = figures["p99"], figures.get("p99_ci")
        if bound is None or value is None:
            continue
        if slo.judged_by == "upper_bound" and interval is not None:  # (None: a level recorded before bounds)
            if interval[1] is None:
                out.append(Breach(limit, None, bound, samples=figures["n"]))
                continue
            value = interval[1]
        if value > bound:
            out.append(Breach(limit, value, bound))
    if slo.goodput_fraction is not None:
        share = level["goodput_requests"] / requests
        if share < slo.goodput_fraction:
            out.append(Breach("goodput_fraction", share, slo.goodput_fraction))
    elif failed:
        out.append(Breach("failed", failed))
    return out


def bracket(probes: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(highest level met below the lowest broken, lowest broken) from (level, met) pairs."""
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
    repeats); returns the search's part of `throughput.json`."""
    assert params.slo is not None and params.search is not None
    probes: list[dict[str, Any]] = []
    pairs: list[tuple[float, bool]] = []
    while (level := next_level(params, start, pairs)) is not None:
        broke = breaches(await measure(level, 0), params.slo)
        probes.append({"level": level, "met": not broke, "breaches": [asdict(b) for b in broke]})
        pairs.append((level, not broke))
    met, broken = bracket(pairs)
    runs = [not probe["breaches"] for probe in probes if probe["level"] == met]
    repeats: list[dict[str, Any]] = []
    if met is not None:  # the level found, repeated
        for run in range(1, params.search_repeats):
            broke = breaches(await measure(met, run), params.slo)
            repeats.append({"run": run, "met": not broke, "breaches": [asdict(b) for b in broke]})
            runs.append(not broke)
    return {
        "by": params.search,
        "slo": params.slo.model_dump(mode="json"),
        "start": start,
        "probes": probes,
        "met": met,
        "broken": broken,
        "broken_by": next(p["breaches"] for p in probes if p["level"] == broken) if broken else [],
        "stopped": stopped_because(params, pairs),
        "repeats": repeats,
        "met_runs": sum(runs),
        "runs": len(runs),
    }


def breach_text(breach: Mapping[str, Any]) -> str:
    """A recorded breach (`throughput.json`'s `search.broken_by`) in words."""
    return Breach(**breach).text()


def slo_text(slo: Mapping[str, Any]) -> str:
    """A recorded SLO (`search.slo`) in words: "TTFT p99 <= 2 s, goodput >= 0.9"."""
    parts = [
        f"{name} <= {slo[key]:g} s"
        for name, key in (("TTFT p99", "ttft_p99_s"), ("TPOT p99", "tpot_p99_s"))
        if slo.get(key) is not None
    ]
    if slo.get("goodput_fraction") is not None:
        parts.append(f"goodput >= {slo['goodput_fraction']:g} of requests")
    judged = {"upper_bound": " (each p99 by its 95% upper bound)", "estimate": " (each p99 as estimated)"}
    p99 = slo.get("ttft_p99_s") is not None or slo.get("tpot_p99_s") is not None
    return ", ".join(parts) + (judged.get(slo.get("judged_by", ""), "") if p99 else "")


def search_text(found: Mapping[str, Any]) -> str:
    """A recorded search (`throughput.json`'s `search`) in a line: the level found within the SLO, the level
    above it that broke it and which limit, and with repeats in how many runs the level met it."""
    unit = " users" if found["by"] == "users" else " req/s"
    slo, met, broken = slo_text(found["slo"]), found["met"], found["broken"]
    why = "; ".join(breach_text(b) for b in found["broken_by"])
    if met is None:
        return f"none met {slo} (from {broken:g}{unit}: {why})"
    above = f"{broken:g}{unit} broke it: {why}" if broken is not None else "nothing probed broke it"
    runs = f"; met in {found['met_runs']}/{found['runs']} runs" if found["runs"] > 1 else ""
    return f"{met:g}{unit} within {slo} ({above}){runs}"
