"""The engine's own counters over each check: the `/metrics` snapshots before and after it, as deltas."""

from __future__ import annotations

import json

from ..results.store import RunDir
from .tables import markdown_table

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


def counter_deltas(run: RunDir) -> dict[str, dict[str, float]]:
    """Per check: the engine's counters after - before (common names, summed over replicas), from
    `metrics.jsonl`; the latest attempt's snapshots win."""
    path = run.path / "metrics.jsonl"
    if not path.exists():
        return {}
    snapshots: dict[tuple[str, str], dict[str, float]] = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        total: dict[str, float] = {}
        for replica in entry.get("replicas", []):
            for name, value in replica.get("common", {}).items():
                total[name] = total.get(name, 0.0) + value
        snapshots[(entry["check"], entry["phase"])] = total
    deltas = {}
    for (check, phase), after in snapshots.items():
        before = snapshots.get((check, "before"))
        if phase == "after" and before is not None:
            deltas[check] = {n: after[n] - before[n] for n in COUNTER_NAMES if n in after and n in before}
    return deltas


def counters_section(run: RunDir) -> list[str]:
    deltas = {check: d for check, d in counter_deltas(run).items() if check != "run" and d}
    if not deltas:
        return []
    names = [n for n in COUNTER_NAMES if any(n in d for d in deltas.values())]
    rows = [[check, *(f"{d[n]:.0f}" if n in d else "n/a" for n in names)] for check, d in deltas.items()]
    return [
        "",
        "## Engine counters per check (`/metrics`, after - before)",
        "",
        markdown_table(rows, ["check", *names]),
        "",
        "Common names over the engines' own (docs/metrics.md); n/a: this engine does not export it.",
    ]
