"""The evidence page's parts of claim 2: one-shot retrieval by length and depth as a heatmap (the share of
trials that found the fact), retrieval against depth for runs that asked for a depth curve, and every
answer a run got (`answers`, the page's appendix)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...render.figure_layout import PageRun, plot_figure
from .file import NeedleFile
from .section import curve_points, outcome


def figures(results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, str, int], dict[float, list[bool]]] = {}
    curves: list[dict[str, Any]] = []
    for row in runs:
        needle = NeedleFile.load(results / "runs" / row.run_id)
        for trial in needle.trials if needle is not None else []:
            if trial.found is not None:
                found = cells.setdefault((row.deployment, trial.task, trial.length), {})
                found.setdefault(trial.depth, []).append(trial.found)
        if needle is not None and needle.depth_curve:
            named = len(needle.task_names()) > 1
            for (task, length), line in curve_points(needle).items():
                label = f"{row.deployment}: " + f"{task}, " * named + f"{length} tokens"
                curves.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": label,
                        "x": [d for d, _ in line],
                        "y": [share for _, share in line],
                    }
                )
    if not cells:
        return []
    depths = sorted({d for found in cells.values() for d in found})
    keys = sorted(cells, key=lambda k: (k[0], k[1] != "single", k[1], k[2]))
    z = [[_share(cells[k].get(d)) for d in depths] for k in keys]
    heat = {
        "type": "heatmap",
        "x": [f"{d:.0%}" for d in depths],
        "y": [
            f"{name}: " + ("" if task == "single" else f"{task}, ") + f"{length} tokens"
            for name, task, length in keys
        ],
        "z": z,
        "zmin": 0,
        "zmax": 1,
        "colorscale": [[0, "#e8a0a0"], [1, "#8fd18f"]],
        "hovertemplate": "%{y} at depth %{x}: %{z:.0%} found<extra></extra>",
    }
    return [
        plot_figure(
            "One-shot retrieval by length and depth (share of trials that found the fact)",
            [heat],
            height=140 + 28 * len(keys),
            xaxis={"title": {"text": "depth of the planted fact"}, "type": "category"},
            yaxis={"type": "category", "automargin": True, "autorange": "reversed"},
        )
    ] + _curve_figure(curves)


def _curve_figure(curves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Retrieval against depth, a line per deployment, task and length (runs that asked for a curve)."""
    if not curves:
        return []
    return [
        plot_figure(
            "Retrieval by depth (share of answers that found the fact)",
            curves,
            xaxis={
                "title": {"text": "depth of the planted fact"},
                "range": [-0.02, 1.02],
                "tickformat": ".0%",
            },
            yaxis={"title": {"text": "share found"}, "range": [-0.05, 1.05]},
        )
    ]


def _share(found: list[bool] | None) -> float | None:
    return None if not found else sum(found) / len(found)


@dataclass(frozen=True)
class Answer:
    """One trial as the page's appendix lists it."""

    length: int
    depth: float
    expected: str | None
    outcome: str
    answer: str


def answers(run_path: Path) -> list[Answer] | None:
    """Every answer the run's needle check got, in order; None where it has no needle check."""
    needle = NeedleFile.load(run_path)
    if needle is None:
        return None
    return [Answer(t.length, t.depth, t.expected, outcome(t), t.answer) for t in needle.trials]
