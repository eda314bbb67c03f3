"""The engine's own counters over each check: the `/metrics` snapshots before and after it, as deltas (read by
the cache audit, the agreement table and the reports)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..engines.prom import common_metrics, printed_digits, rounding_error
from .run_dir import RunDir

COUNTER_NAMES = (
    "prompt_tokens",
    "generation_tokens",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "preemptions",
    "spec_drafts",
    "spec_draft_tokens",
    "spec_accepted_tokens",
)


@dataclass(frozen=True)
class CheckCounters:
    """The engine's counters over one check (or one unit of it: a level, a rate) in one attempt: `deltas`
    (after - before under the common names, summed over replicas) and `uncertainty`, how far each delta may
    lie from the true count because the engine printed the two snapshots rounded (`Engine.counter_digits`:
    llama.cpp prints 6 significant digits); 0 where exact."""

    check: str  # the snapshot's tag: a check's name, or a unit of it ("throughput-u2")
    attempt: int
    deltas: dict[str, float]
    uncertainty: dict[str, float]


def counter_windows(run: RunDir) -> list[CheckCounters]:
    """Every (check or unit, attempt) with both snapshots in `metrics.jsonl`, recomputed from the raw samples
    (so a name mapped later reaches older runs), in attempt order; an interrupted attempt's check, with no
    "after", has none."""
    path = run.path / "metrics.jsonl"
    if not path.exists():
        return []
    snapshots: dict[tuple[str, int, str], tuple[dict[str, float], dict[str, float]]] = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        total: dict[str, float] = {}
        error: dict[str, float] = {}
        for replica in entry.get("replicas", []):
            samples = replica.get("samples", {})
            digits = printed_digits(samples)
            for name, value in common_metrics(samples).items():
                total[name] = total.get(name, 0.0) + value
                error[name] = error.get(name, 0.0) + rounding_error(value, digits)
        snapshots[(entry["check"], int(entry.get("attempt", 1)), entry["phase"])] = (total, error)
    windows = []
    for (check, attempt, phase), (after, after_error) in sorted(
        snapshots.items(), key=lambda item: item[0][1]
    ):
        before, before_error = snapshots.get((check, attempt, "before"), ({}, {}))
        if phase == "after" and before:
            names = [n for n in after if n in before]
            windows.append(
                CheckCounters(
                    check,
                    attempt,
                    {n: after[n] - before[n] for n in names},
                    {n: after_error[n] + before_error[n] for n in names},
                )
            )
    return windows


def engine_counters(run: RunDir) -> dict[str, CheckCounters]:
    """Per check, its `CheckCounters` (`counter_windows`); the latest attempt with both snapshots wins."""
    return {window.check: window for window in counter_windows(run)}


def engine_deltas(run: RunDir) -> dict[str, tuple[int, dict[str, float]]]:
    """Per check: (attempt, the engine's counters after - before: `engine_counters`)."""
    return {check: (c.attempt, c.deltas) for check, c in engine_counters(run).items()}


def counter_deltas(run: RunDir) -> dict[str, dict[str, float]]:
    """Per check: the counters of `COUNTER_NAMES` after - before (`engine_deltas`)."""
    return {
        check: {n: deltas[n] for n in COUNTER_NAMES if n in deltas}
        for check, (_, deltas) in engine_deltas(run).items()
    }


def reported_text(value: float | None, digits: int = 0) -> str:
    """A figure the server may not have reported: "not reported", never 0."""
    return "not reported" if value is None else f"{value:.{digits}f}"


def engine_hits(run: RunDir, check: str) -> str:
    """ "; the server's prefix-cache counter: +N tokens" over one check, or "" where `/metrics` has none:
    what stands beside a cached-token figure the server's `usage` did not report."""
    hits = counter_deltas(run).get(check, {}).get("prefix_cache_hits")
    return "" if hits is None else f"; the server's prefix-cache counter: +{hits:.0f} tokens"
