"""A replayed trace in the evidence table: its column and its cell. It rests on the cached tokens a server
reports in `usage`; where it reports none the cell says "not reported", never 0/N, carries no value (so no
reading ranks it), and shows the engine's own prefix-cache counter beside it."""

from __future__ import annotations

from pathlib import Path

from ...render.cell import Cell
from ...render.column import TRAFFIC, Column, Guide
from ...render.tables import p99_bound_text
from ...store.counters import engine_hits
from ...store.run_dir import RunDir
from .file import TraceFile

TRACE_COLUMNS: tuple[Column, ...] = (
    Column(
        "trace",
        "trace replay",
        TRAFFIC,
        glance="trace replay",
        guide=Guide(
            "Serves the most of a replayed trace's shared prefixes from its cache",
            "on this trace at its time scale; an engine that reports no cached tokens reads n/a",
            lower_is_better=False,
        ),
    ),
)


def trace_cells(results: Path, run: RunDir) -> dict[str, Cell]:
    """A replayed trace: TTFT p99 and the prefix-cache hits reported against those its blocks imply."""
    t = TraceFile.load(run.path)
    if t is None:
        return {}
    p99, reported, share = t.ttft_s.p99, t.reported_cached_tokens, t.cached_share
    if reported is None:
        hits = f"cached tokens not reported{engine_hits(run, 'trace')}"
    else:
        served = "n/a" if share is None else f"{share:.0%} of implied cache hits"
        hits = f"{served} ({t.sharing_served}/{t.sharing_requests} shared prefixes served)"
    text = (
        f"{t.requests - t.failed}/{t.requests} ok, "
        f"TTFT p99 {'n/a' if p99 is None else f'{p99:.2f}'} s{p99_bound_text(t.ttft_s)}; {hits}"
    )
    return {"trace": Cell(text, str(TraceFile.path_in(run.path).relative_to(results)), share)}
