"""Returning users in the evidence table: its column and its cell. Where the server reported no cached tokens
the count is not reported (never 0/N) and has no value, so no reading ranks it; the engine's own prefix-cache
counter stands beside it."""

from __future__ import annotations

from pathlib import Path

from ...render.cell import Cell
from ...render.column import TRAFFIC, Column, Guide
from ...store.counters import engine_hits
from ...store.run_dir import RunDir
from .file import ReturningFile

RETURNING_COLUMNS: tuple[Column, ...] = (
    Column(
        "returning",
        "returning users",
        TRAFFIC,
        glance="returning users",
        guide=Guide(
            "Keeps a returning conversation's context after other users' traffic",
            "at the conversations, context and filler traffic of its `[checks.returning]`; more traffic or "
            "longer contexts push more out",
            lower_is_better=False,
        ),
    ),
)


def returning_cells(results: Path, run: RunDir) -> dict[str, Cell]:
    """Returning users: how many found their history cached, and the median TTFT on return against fresh.
    Where the server reported no cached tokens the count is not reported (never 0/N) and has no value, so
    no reading ranks it."""
    data = ReturningFile.load(run.path)
    if data is None:
        return {}
    source = str(ReturningFile.path_in(run.path).relative_to(results))
    verdicts = data.verdicts
    judged = sum(n for verdict, n in verdicts.items() if verdict not in ("not reported", "failed"))
    cached = verdicts.get("cached", 0)
    back, fresh = data.ttft_return_s, data.ttft_fresh_s
    times = "" if back is None or fresh is None else f", TTFT {back:.2f} s on return vs {fresh:.2f} s fresh"
    unreported = verdicts.get("not reported", 0)
    if not judged and unreported:
        text = f"cached tokens not reported ({unreported} returns){engine_hits(run, 'returning')}{times}"
        return {"returning": Cell(text, source)}
    total = len(data.conversations)
    missing = f" ({unreported} not reported)" if unreported else ""
    return {
        "returning": Cell(
            f"{cached}/{total} found their history cached{missing}{times}",
            source,
            cached,
        )
    }
