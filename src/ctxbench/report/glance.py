"""A run at a glance: the first screen of its report says what passed, what did not and why.

One line per thing the run checked, in the order of the claims: a verdict (pass or FAIL where the claim has a
written pass condition, "measured" where the figure is for the reader to judge, "not judged" for the recall of
random weights), the result as the evidence
table writes it (the same cells: `results.evidence.evidence_row`), why it did not pass (which depths, turns
or requests), and the file it came from; then the run's status and the reasons for it (docs/validation.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..checks.catalog import CHECKS
from ..records import RequestRecord, requests_line
from ..render.cell import FAIL, MEASURED, PASS, Glance
from ..render.tables import cell as table_cell
from ..results.columns import EVIDENCE_COLUMNS
from ..results.evidence import Cell, Row, evidence_row
from ..store.run_dir import RunDir


def glance_section(run: RunDir, records: Sequence[RequestRecord]) -> list[str]:
    """The report's first section: a table of verdicts, then the status and its reasons."""
    results = run.path.parent.parent
    row = evidence_row(results, run)
    lines = [
        "",
        f"## At a glance: {row.status.upper()}",
        "",
        "| check | verdict | result | why not | source |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {check} | {verdict} | {table_cell(cell.text)} | {why} | `{_source(results, run, cell)}` |"
        for check, verdict, cell, why in _verdicts(run, row, records)
    ]
    if row.reasons:
        lines += ["", f"{row.status.capitalize()} because:", *(f"- {reason}" for reason in row.reasons)]
    else:
        lines += ["", "Validated: every rule of docs/validation.md holds."]
    return lines


def _verdicts(run: RunDir, row: Row, records: Sequence[RequestRecord]) -> list[tuple[str, str, Cell, str]]:
    # each check's own lines (`Check.glance`), where it has a written pass condition: capacity, retrieval and
    # the ramp's recall, in the claims' order
    own: list[Glance] = [g for check in CHECKS for g in check.glance(run, row.own)]
    out: list[tuple[str, str, Cell, str]] = [(g.label, g.verdict, g.cell, g.why) for g in own]
    for column in EVIDENCE_COLUMNS:
        cell = row.cell(column.key)
        if column.glance is not None and cell.source:
            why = "the client fell behind its schedule" if cell.client_behind else ""
            out.append((column.glance, MEASURED, cell, why))
    # the capacity check's request over the limit is meant to be refused: not a failure (requests_line)
    failed = [r for r in records if r.failed_a_check]
    kinds = Counter(r.error.kind for r in failed if r.error is not None)
    text = requests_line(records)
    why = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    if records:
        # named from the results directory as every evidence cell is (a relative `results` gave
        # `../../results/runs/<id>/requests.jsonl`, a path that is not there)
        source = str(Path("runs", run.run_id, run.requests_path.name))
        out.append(("requests", FAIL if failed else PASS, Cell(text, source), why))
    return out


def _source(results: Path, run: RunDir, cell: Cell) -> str:
    """The cell's file as seen from the run's report (the evidence names it from the results directory)."""
    path = Path(cell.source)
    path = path if path.is_absolute() else results / path
    try:
        return str(path.relative_to(run.path))
    except ValueError:
        return str(Path("..", "..") / path.relative_to(results))
