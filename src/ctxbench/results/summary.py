"""ctxbench's own run summary (`ctxbench export --format summary`): the evidence table as a versioned JSON
file another tool can read without ctxbench, each run's status, its reasons and every column's cell (the
text shown, the number readings compare, the file it came from). `ctxbench export --schema` prints its JSON
schema. Loading a written summary gives back an equal `Summary` (tested)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .. import __version__
from .columns import COLUMNS
from .evidence import Row, collect

SUMMARY_VERSION: Literal[1] = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SummaryCell(_Frozen):
    label: str  # the column's heading in the evidence table
    text: str  # as the table shows it; "not run" where the check did not run
    value: float | None = None  # what the decision guide compares; None where there is nothing to compare
    source: str = ""  # the file it came from, relative to the results directory


class SummaryRun(_Frozen):
    run_id: str
    deployment: str
    gpus: int
    random_weights: bool
    status: Literal["validated", "provisional", "failed"]
    reasons: tuple[str, ...]
    cells: dict[str, SummaryCell]  # by column key (docs/results-format.md lists them)


class Summary(_Frozen):
    summary_version: Literal[1] = SUMMARY_VERSION
    ctxbench_version: str
    runs: tuple[SummaryRun, ...]

    def save(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> Summary:
        return cls.model_validate_json(path.read_text())


def _run(row: Row) -> SummaryRun:
    titles = dict(COLUMNS)
    cells = {
        key: SummaryCell(label=titles[key], text=cell.text, value=cell.value, source=cell.source)
        for key, _ in COLUMNS[2:]
        for cell in [row.cell(key)]
    }
    return SummaryRun(
        run_id=row.run_id,
        deployment=row.deployment,
        gpus=row.gpus,
        random_weights=row.random_weights,
        status=row.status,
        reasons=row.reasons,
        cells=cells,
    )


def summarize(results: Path, price_per_gpu_hour: float | None = None) -> Summary:
    """Every run under `results/runs`, oldest first, as the evidence table has them."""
    return Summary(
        ctxbench_version=__version__, runs=tuple(_run(r) for r in collect(results, price_per_gpu_hour))
    )
