"""The evidence cells of traffic that comes back: a replayed trace and the cache's fidelity (the checks
that are folders hold their own cells). They rest on the
cached tokens a server reports in `usage`; where it reports none the cell says "not reported", never 0/N,
carries no value (so no reading ranks it), and shows the engine's own prefix-cache counter beside it."""

from __future__ import annotations

from pathlib import Path

from ..check_files import FidelityFile, TraceFile
from ..counters import engine_hits
from ..render.cell import Cell
from ..store import RunDir
from .load_cells import p99_bound_text


def trace_cell(results: Path, run: RunDir) -> dict[str, Cell]:
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


def fidelity_cell(results: Path, run: RunDir, data: FidelityFile) -> dict[str, Cell]:
    """Cache fidelity at the longest length (`FidelityFile.summary`). A value (1: every cached path the same
    tokens within the tolerance, 0: not) only where cold was deterministic and a cached path was compared."""
    source = str(FidelityFile.path_in(run.path).relative_to(results))
    longest = max(data.lengths, key=lambda length: length.length)
    cold = next((p for p in longest.paths if p.path == "cold"), None)
    cached = [p for p in longest.paths if p.path in ("warm", "partial", "restored") and p.verdict is not None]
    deterministic = cold is not None and cold.bitwise
    value = float(all(p.holds for p in cached)) if deterministic and cached else None
    # where the records say nothing of the cache, the engine's counter over the check
    unreported = any(p.cached_tokens is None for p in cached)
    text = data.summary(engine_hits(run, "fidelity") if unreported else "")
    return {"fidelity": Cell(text, source, value)}
