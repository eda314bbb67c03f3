"""Cache fidelity in the evidence table: its column, its cell, and what it says of a run's status (a cached
path that changed the answer fails the run, unless the weights are random: then the answers are nearly flat
and the difference is numerics; two cold answers that differ make the comparisons no verdict)."""

from __future__ import annotations

from pathlib import Path

from ...render.cell import Cell
from ...render.column import FIDELITY, Column, Guide
from ...store.counters import engine_hits
from ...store.run_dir import RunDir
from ..base import Judgement
from .file import FidelityFile

FIDELITY_COLUMNS: tuple[Column, ...] = (
    Column(
        "fidelity",
        "cache fidelity",
        FIDELITY,
        glance="cache fidelity",
        guide=Guide(
            "Returns the same answer from its cache as computed cold",
            "greedy answers at the lengths and paths of its `[checks.fidelity]`, compared token by token "
            "with their log-probabilities; not ranked: each engine has its own numerics",
            caveat=False,
            listed="cells",
        ),
    ),
)


def fidelity_cells(results: Path, run: RunDir) -> dict[str, Cell]:
    """Cache fidelity at the longest length (`FidelityFile.summary`). A value (1: every cached path the same
    tokens within the tolerance, 0: not) only where cold was deterministic and a cached path was compared."""
    data = FidelityFile.load(run.path)
    if data is None:
        return {}
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


def judgement_of(run: RunDir, random_weights: bool) -> Judgement:
    """docs/validation.md: the cache changed the answer (a cached path diverged or drifted where the engine
    answered the same prompt bit for bit cold) fails the run; with random weights it is said, not failed
    (the cold answer's top 5 lie within tenths of a nat, so the cached path's numerics flip tokens:
    docs/metrics.md); cold answers that differ keep the run from VALIDATED."""
    data = FidelityFile.load(run.path)
    if data is None:
        return Judgement()
    changed = data.failures()
    noise = tuple(
        f"not deterministic cold at {n}: the cache fidelity comparisons are not a verdict"
        for n in data.cold_noise()
    )
    if changed and not random_weights:
        failed = (
            f"the cache changed the answer: {'; '.join(changed)} (the engine answers the same prompt "
            "bit for bit cold; the run report's cache fidelity section has both answers)"
        )
        return Judgement(failed=(failed,), provisional=noise)
    flat = (
        f"the cache did not give the cold answer: {'; '.join(changed)}; with random weights the answers "
        "are nearly flat, so this is numerics until a real model shows it (the run report has the drift)"
    )
    return Judgement(provisional=((flat,) if changed else ()) + noise)
