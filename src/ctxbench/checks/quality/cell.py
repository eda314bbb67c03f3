"""GSM8K accuracy in the evidence table: its column and its cell (flexible scoring, with its Wilson 95%
interval, n, endpoint and few-shot count), from the run's latest summary in the results' `quality.jsonl`."""

from __future__ import annotations

from pathlib import Path

from ...render.cell import Cell
from ...render.column import QUALITY, Column
from ...store.run_dir import RunDir
from .file import QUALITY_FILE, run_summaries

QUALITY_COLUMNS: tuple[Column, ...] = (
    Column("quality", "GSM8K (flexible) [95%]", QUALITY, glance="quality"),
)


def quality_cells(results: Path, run: RunDir) -> dict[str, Cell]:
    last = run_summaries(results).get(run.run_id)
    if last is None:
        return {}
    flexible = last.flexible
    if flexible.accuracy is None or flexible.low is None or flexible.high is None:
        return {"quality": Cell(f"no answered samples ({last.failed} failed)", str(QUALITY_FILE))}
    return {
        "quality": Cell(
            f"{flexible.accuracy:.2f} [{flexible.low:.2f}, {flexible.high:.2f}] n={last.n} "
            f"({last.endpoint}, {last.fewshot}-shot)",
            str(QUALITY_FILE),
            flexible.accuracy,
        )
    }
