"""The campaign report: the evidence table, the decision guide and the figures, rebuilt from a results
directory alone, as Markdown and as one self-contained HTML file (figures inlined, no CDN, opens
offline). Every name and model answer is escaped: the HTML is built with jinja2's autoescape.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from markupsafe import Markup, escape

from ..checks.catalog import CHECKS
from ..checks.needle import answers as needle_answers
from ..measure import stats
from ..render.figure_layout import PageRun
from ..results.columns import COLUMN_GROUPS, COLUMNS, REPEATED
from ..results.evidence import MISSING, Row, collect
from ..store.run_dir import RunDir
from .decide import Reading, readings
from .interactive import figures_json, interactive_figures, plotly_js

# The page itself (jinja2, autoescaped): a file beside this module, shipped in the wheel.
TEMPLATE = "evidence.html.j2"


@dataclass(frozen=True)
class Group:
    """One claim's table on the page: its title and the columns some row measured."""

    title: str
    columns: tuple[tuple[str, str], ...]


def groups_of(rows: Sequence[Row]) -> list[Group]:
    """The claim groups that hold at least one measured cell, each with only its measured columns."""
    titles = dict(COLUMNS)
    out = []
    for title, keys in COLUMN_GROUPS:
        measured = tuple((k, titles[k]) for k in keys if any(r.cell(k).text != MISSING.text for r in rows))
        if measured:
            out.append(Group(title, measured))
    return out


def cell_of(row: Row, key: str) -> tuple[str, str]:
    if key == "deployment":
        return row.deployment, f"runs/{row.run_id}/manifest.json"
    if key == "status":
        return row.status, ""
    cell = row.cell(key)
    return cell.text, cell.source


@dataclass(frozen=True)
class Pair:
    """Two deployments side by side: a row per evidence column, the latest run of each."""

    a: str
    b: str
    title: str
    rows: tuple[tuple[str, str, str, str], ...]  # label, a, b, whether the difference is established


def comparisons(results: Path) -> list[tuple[str, str, str]]:
    """(a, b, question) of every campaign run into `results` (from `campaigns/<name>.json`)."""
    pairs = []
    for path in sorted((results / "campaigns").glob("*.json")):
        try:
            pairs += [
                (c["a"], c["b"], c.get("question", ""))
                for c in json.loads(path.read_text()).get("compare", [])
            ]
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return pairs


def repeat_intervals(rows: Sequence[Row]) -> dict[str, tuple[int, dict[str, stats.Interval | None]]]:
    """Per deployment with runs that did not fail: (runs, the median over runs with a 95% bootstrap interval
    of each repeated figure; None with fewer than 3 values)."""
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        if row.status != "failed":
            grouped.setdefault(row.deployment, []).append(row)
    return {
        name: (
            len(runs),
            {
                key: stats.median_interval(
                    [v for r in runs if (v := r.cell(key).value) is not None], seed=f"{name}-{key}"
                )
                for key, _, _ in REPEATED
            },
        )
        for name, runs in grouped.items()
    }


def repeats_table(rows: Sequence[Row]) -> list[list[str]]:
    out = []
    for name, (runs, figures) in repeat_intervals(rows).items():
        if runs < 2:
            continue
        out.append(
            [
                name,
                str(runs),
                *(
                    figure.text(digits) if (figure := figures[key]) else "n/a (fewer than 3 values)"
                    for key, _, digits in REPEATED
                ),
            ]
        )
    return out


def side_by_side(rows: Sequence[Row], results: Path) -> list[Pair]:
    latest = {row.deployment: row for row in rows}  # rows are oldest first
    repeated = repeat_intervals(rows)
    pairs = []
    for a, b, question in comparisons(results):
        if a not in latest or b not in latest:
            continue
        both = [(label, cell_of(latest[a], key)[0], cell_of(latest[b], key)[0]) for key, label in COLUMNS[1:]]
        cells = [
            (label, left, right, "one run a side: no spread")
            for label, left, right in both
            if (left, right) != ("not run", "not run")
        ]
        for check in CHECKS:  # the checks whose folder compares two runs of theirs (`Check.comparison`)
            cells += check.comparison(results, latest[a].run_id, latest[b].run_id)
        if repeated.get(a, (0, {}))[0] >= 3 and repeated.get(b, (0, {}))[0] >= 3:
            for key, label, digits in REPEATED:
                left, right = repeated[a][1][key], repeated[b][1][key]
                if left or right:
                    cells.append(
                        (
                            f"over repeats: {label} (median [95%])",
                            left.text(digits) if left else "n/a",
                            right.text(digits) if right else "n/a",
                            stats.verdict(left, right),
                        )
                    )
        pairs.append(Pair(a, b, f"{a} vs {b}" + (f": {question}" if question else ""), tuple(cells)))
    return pairs


def markdown(
    rows: Sequence[Row],
    guide: Sequence[Reading],
    title: str,
    pairs: Sequence[Pair] = (),
    figures: Sequence[str] = (),
) -> str:
    header = [label for _, label in COLUMNS] + ["why"]
    lines = [
        f"# ctxbench evidence: {title}",
        "",
        "Evidence, not a ranking: each claim has its own column and every cell names its source file "
        "(relative to the results directory). Status rules: docs/validation.md.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        cells = [cell_of(row, key) for key, _ in COLUMNS]
        shown = [f"{text} <sub>{source}</sub>" if source else text for text, source in cells]
        lines.append(
            "| " + " | ".join(c.replace("|", "\\|") for c in [*shown, "; ".join(row.reasons)]) + " |"
        )
    repeats = repeats_table(rows)
    if repeats:
        header = ["deployment", "runs", *(label + " (median [95%])" for _, label, _ in REPEATED)]
        lines += [
            "",
            "## Repeats",
            "",
            "Each deployment run several times: the median over its runs with a 95% "
            "bootstrap interval (3 runs or more).",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        lines += ["| " + " | ".join(r) + " |" for r in repeats]
    if pairs:
        lines += [
            "",
            "## Side by side",
            "",
            "A difference is established only where intervals do not overlap; one value "
            "a side has no spread.",
        ]
    for pair in pairs:
        lines += ["", f"### {pair.title}", "", f"| | {pair.a} | {pair.b} | difference |", "|---|---|---|---|"]
        lines += [
            f"| {label} | {left} | {right} | {verdict} |".replace("\n", " ")
            for label, left, right, verdict in pair.rows
        ]
    lines += ["", "## Decision guide", ""]
    lines += [f"- **{r.question}**: {r.answer} ({r.conditions})" for r in guide]
    if figures:
        lines += ["", "## Figures", "", *figures]
    return "\n".join(lines) + "\n"


def inline_code(text: str) -> Markup:
    """Text whose `backticked` spans are code, as the Markdown report writes them: escaped, each span in
    <code> (an unmatched backtick stays a backtick)."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one opens nothing
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    code = Markup("<code>{}</code>")
    return Markup("").join(code.format(part) if i % 2 else escape(part) for i, part in enumerate(parts))


def write_campaign_report(results: Path, price_per_gpu_hour: float | None = None) -> tuple[Path, Path]:
    """Write `<results>/report.md` and `<results>/report.html` from the files alone."""
    from jinja2 import Environment

    rows = collect(results, price_per_gpu_hour)
    guide = readings(rows)
    pairs = side_by_side(rows, results)
    # named by the campaigns its runs belong to (the directory's name only where no run names one)
    named = {RunDir(results / "runs" / row.run_id).manifest().campaign for row in rows}
    campaigns = sorted(name for name in named if name)
    title = ", ".join(campaigns) or results.resolve().name
    answers = [
        (row.run_id, listed)
        for row in rows
        if (listed := needle_answers(results / "runs" / row.run_id)) is not None
    ]
    env = Environment(autoescape=True)
    env.filters["code"] = inline_code
    page = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    html = env.from_string(page).render(
        title=title,
        rows=rows,
        groups=groups_of(rows),
        not_run=[label for key, label in COLUMNS[2:] if all(r.cell(key).text == MISSING.text for r in rows)],
        guide=guide,
        plotly_js=plotly_js(),
        figures=figures_json(interactive_figures(results, rows)),
        answers=answers,
        pairs=pairs,
        repeats=repeats_table(rows),
        repeated=REPEATED,
    )
    md_path, html_path = results / "report.md", results / "report.html"
    runs = [PageRun(row.deployment, row.run_id, row.own) for row in rows]
    pictures = [f for check in CHECKS for f in check.report_figures(results, runs)]
    if pictures:
        (results / "figures").mkdir(exist_ok=True)
        for _, name, png in pictures:
            (results / "figures" / name).write_bytes(png)
    figure_lines = [f"![{caption}](figures/{name})" for caption, name, _ in pictures]
    md_path.write_text(markdown(rows, guide, title, pairs, figure_lines))
    html_path.write_text(html)
    return md_path, html_path
