"""The engine's own counters over each check: the `/metrics` snapshots before and after it, as deltas."""

from __future__ import annotations

import json

from ..engines.prom import common_metrics
from ..store import RunDir

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


def engine_deltas(run: RunDir) -> dict[str, tuple[int, dict[str, float]]]:
    """Per check: (attempt, the engine's counters after - before under the common names, summed over
    replicas), recomputed from the raw samples in `metrics.jsonl` (so a name mapped later reaches older
    runs); the latest attempt with both snapshots wins."""
    path = run.path / "metrics.jsonl"
    if not path.exists():
        return {}
    snapshots: dict[tuple[str, int, str], dict[str, float]] = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        total: dict[str, float] = {}
        for replica in entry.get("replicas", []):
            for name, value in common_metrics(replica.get("samples", {})).items():
                total[name] = total.get(name, 0.0) + value
        snapshots[(entry["check"], int(entry.get("attempt", 1)), entry["phase"])] = total
    deltas: dict[str, tuple[int, dict[str, float]]] = {}
    for (check, attempt, phase), after in sorted(snapshots.items(), key=lambda item: item[0][1]):
        before = snapshots.get((check, attempt, "before"))
        if phase == "after" and before is not None:
            deltas[check] = (attempt, {n: after[n] - before[n] for n in after if n in before})
    return deltas


def counter_deltas(run: RunDir) -> dict[str, dict[str, float]]:
    """Per check: the counters of `COUNTER_NAMES` after - before (`engine_deltas`)."""
    return {
        check: {n: deltas[n] for n in COUNTER_NAMES if n in deltas}
        for check, (_, deltas) in engine_deltas(run).items()
    }


def reported_text(value: float | None, digits: int = 0) -> str:
    """A figure the server may not have reported: "not reported", never 0."""
    return "not reported" if value is None else f"{value:.{digits}f}"
