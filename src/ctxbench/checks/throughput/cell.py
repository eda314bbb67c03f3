"""The evidence cells of many users (`throughput.json`): the closed loop's best level and its cost, the open
loop's highest rate kept up with, and the SLO search's highest level within its SLO."""

from __future__ import annotations

from pathlib import Path

from ...measure.slo_search import search_text
from ...plan import cost_per_million
from ...render.cell import Cell
from ...render.column import MANY_USERS, Column, Guide
from ...render.tables import p99_bound_text
from ...store.run_dir import RunDir
from .file import ThroughputFile
from .recall_under_load import RecallUnderLoad


def throughput_cells(results: Path, run: RunDir, gpus: int, price_per_gpu_hour: float) -> dict[str, Cell]:
    """The level with the most output tokens/s, and its cost per million output tokens."""
    data = ThroughputFile.load(run.path)
    if data is None:
        return {}
    rated = [(level.output_tokens_per_s, users, level) for users, level in data.levels.items()]
    rated = [item for item in rated if item[0]]
    if not rated:
        return {}
    rate, users, best = max(rated, key=lambda item: item[0] or 0.0)
    source = str(ThroughputFile.path_in(run.path).relative_to(results))
    cells = {
        "throughput": Cell(
            f"{rate:.0f} output tok/s at {users} user{'s' * (users != '1')}",
            source,
            rate,
        )
    }
    cost = cost_per_million(price_per_gpu_hour, gpus, best.window_s, best.output_tokens)
    cells["throughput_cost"] = Cell(
        f"${cost:.2f}/M output tokens ({gpus} GPU at ${price_per_gpu_hour:.2f}/h)"
        if cost is not None
        else "n/a (no GPU count)",
        source,
        cost,
    )
    return cells


def open_loop_cell(results: Path, run: RunDir) -> dict[str, Cell]:
    """The highest offered rate the server kept up with, and where it saturated (sustained rate there)."""
    data = ThroughputFile.load(run.path)
    if data is None:
        return {}
    rates = {rate: line for rate, line in data.rates_sorted() if line.saturated is not None}
    if not rates:
        return {}
    kept = [rate for rate, line in rates.items() if not line.saturated]
    saturated = [(rate, line) for rate, line in rates.items() if line.saturated]
    parts = []
    if kept:
        best = rates[max(kept)]
        p99 = best.ttft_s.p99
        parts.append(
            f"kept up with {max(kept):g} req/s (TTFT p99 {'n/a' if p99 is None else f'{p99:.2f}'} s"
            f"{p99_bound_text(best.ttft_s)})"
        )
    else:
        parts.append("kept up with none of the rates offered")
    if saturated:
        rate, line = saturated[0]
        sustained = line.sustained_per_s
        parts.append(f"saturated at {rate:g}" + (f" (sustained {sustained:.2g} req/s)" if sustained else ""))
    behind = sorted(rate for rate, line in rates.items() if line.client_behind)
    if behind:
        parts.append(f"client behind at {', '.join(f'{r:g}' for r in behind)} req/s")
    cell = Cell(
        "; ".join(parts),
        str(ThroughputFile.path_in(run.path).relative_to(results)),
        max(kept) if kept else 0.0,
        client_behind=bool(behind),
    )
    return {"open_loop": cell}


def slo_cell(results: Path, run: RunDir) -> dict[str, Cell]:
    """The highest level that met the SLO (the value, so readings can name it), the level above it that broke
    it and which limit broke, the SLO itself and, with repeats, in how many runs the level met it."""
    data = ThroughputFile.load(run.path)
    found = data.search if data is not None else None
    if not found:
        return {}
    source = str(ThroughputFile.path_in(run.path).relative_to(results))
    if "skipped" in found:
        return {"slo": Cell(f"not searched: {found['skipped']}", source)}
    met = found["met"]
    text = search_text(found)
    return {"slo": Cell(text, source, met)}


def ask_cell(results: Path, run: RunDir) -> dict[str, Cell]:
    """Recall under load beside recall alone (`recall_under_load.py`); its value the share found under
    load, so a reading ranks the deployments that keep it."""
    asked = RecallUnderLoad.of(ThroughputFile.load(run.path))
    if asked is None:
        return {}
    source = str(ThroughputFile.path_in(run.path).relative_to(results))
    loaded = asked.loaded
    return {
        "ask": Cell(asked.text(), source, loaded.found / loaded.asked, scored=(loaded.found, loaded.asked))
    }


# Its evidence columns, in the table's order (results/columns.py places them in the many-users group).
THROUGHPUT_COLUMNS: tuple[Column, ...] = (
    Column(
        "throughput",
        "many users: output tok/s",
        MANY_USERS,
        glance="many users, closed loop",
        repeated=("many users, best output tok/s", 0),
        guide=Guide(
            "Many users, short prompts: most output tokens/s",
            "no GPU count, so no cost (a CPU run)",
            lower_is_better=False,
            missing=(
                "Many users, short prompts",
                "not measured",
                "add `[checks.throughput]` to the campaign file",
            ),
            unless="throughput_cost",
        ),
    ),
    Column(
        "throughput_cost",
        "many users: cost",
        MANY_USERS,
        guide=Guide(
            "Many users, short prompts: cheapest per output token",
            "closed-loop users at the level with the most output tokens/s, this prompt and output length, "
            "this campaign's price and GPU count",
            answer="{text} ({throughput})",
        ),
    ),
    Column(
        "open_loop",
        "many users: rate kept up",
        MANY_USERS,
        glance="many users, open loop",
        guide=Guide(
            "Most requests a second kept up with (open loop)",
            "the highest offered rate whose requests' lag did not grow, at these prompt and output lengths; "
            "compare deployments swept over the same rates (`rates_of_capacity` scales them to each run's "
            "own capacity, so those differ)",
            lower_is_better=False,
        ),
    ),
    Column(
        "slo",
        "many users: most within the SLO",
        MANY_USERS,
        glance="many users, within the SLO",
        guide=Guide(
            "The highest load within an SLO",
            "each run's own search, SLO and prompt and output lengths (the cell says which), not ranked: "
            "levels meet an SLO by the figures of one run of them, and with search_repeats the cell says in "
            "how many runs the level found met it",
            caveat=False,
            listed="cells",
        ),
    ),
    Column(
        "ask",
        "many users: recall under load",
        MANY_USERS,
        glance="many users, recall under load",
        guide=Guide(
            "Keeps finding a planted fact under the load its users can be given",
            "questions of its `ask` length at the level its search found (else its highest level), beside as "
            "many asked alone; few questions give wide intervals (the cell gives them)",
            lower_is_better=False,
        ),
    ),
)
