"""The run report's section of the engine's own counters over each check (`store/counters.py`)."""

from __future__ import annotations

from ..render.tables import markdown_table
from ..store.counters import COUNTER_NAMES, counter_deltas
from ..store.run_dir import RunDir


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
