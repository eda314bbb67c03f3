"""The evidence page's interactive figures: Plotly figure specs built from the rows and their runs' files,
drawn by plotly.js inlined once in the page, so the page stays one file that opens offline (no CDN).

Plotly because one bundle draws every kind the page needs (lines, grouped bars, heatmaps) with hover, zoom
and legend toggling, from a JSON spec built in Python without a server; its cost is the bundle's size
(1.5 MB once a page: the partial bundle of cartesian traces, vendored in `report/vendor/`). The Markdown
report keeps the static PNGs (`report/campaign.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..checks.catalog import CHECKS
from ..measure.telemetry import BETWEEN_CHECKS, TELEMETRY_FILE, by_instant, gpu_series, read_telemetry
from ..render.figure_layout import (
    AXIS,
    LAYOUT,
    TITLE,
    PageRun,
    legend_below,
    plot_figure,
    spread,
    ticks,
    tokens,
)
from ..results.evidence import Row
from ..store.run_dir import RunDir
from ..store.run_files import MANIFEST_FILE
from .check_sections import ramp_table_rows
from .timeline import gpu_axes, gpu_traces, timeline, timeline_figure

# plotly.js's partial bundle of the cartesian traces (vendor/README.md): the page draws scatter, bar and
# heatmap only, and this is 1.5 MB where the full bundle is 4.8 MB.
PLOTLY_BUNDLE = Path(__file__).parent / "vendor" / "plotly-cartesian-4.1.1.min.js"
BUNDLE_TRACES = frozenset(
    ("bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour", "image", "pie")
    + ("scatter", "scatterternary", "violin")
)


def plotly_js() -> str:
    return PLOTLY_BUNDLE.read_text()


def _ramp_figures(results: Path, rows: Sequence[Row]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    recall_rows: list[str] = []
    recall_z: list[list[int | None]] = []
    recall_text: list[list[str]] = []
    for row in rows:
        run = results / "runs" / row.run_id
        if not (run / MANIFEST_FILE).exists():
            continue
        ramp = ramp_table_rows(RunDir(run))
        for users in sorted({r["users"] for r in ramp}, key=int):
            setting = [r for r in ramp if r["users"] == users]
            for user in sorted({r["user"] for r in setting}, key=int):
                mine = sorted((r for r in setting if r["user"] == user), key=lambda r: int(r["turn"]))
                name = f"{row.deployment}, {users} user{'s' if users != '1' else ''}: user {user}"
                timed = [r for r in mine if r["ttft_s"]]
                lines.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": name,
                        "x": [int(r["context_tokens"]) for r in timed],
                        "y": [float(r["ttft_s"]) for r in timed],
                        "hovertemplate": "%{x} tokens: TTFT %{y:.2f} s<extra>" + name + "</extra>",
                    }
                )
                recall_rows.append(name)
                recall_z.append([None if r["recall"] == "" else int(r["recall"]) for r in mine])
                recall_text.append([f"turn {r['turn']}, {r['context_tokens']} tokens" for r in mine])
    if not lines:
        return []
    contexts: list[float] = [x for line in lines for x in line["x"]]
    width = max(len(z) for z in recall_z)
    heat = {
        "type": "heatmap",
        "y": recall_rows,
        "x": [f"turn {t}" for t in range(1, width + 1)],
        "z": [z + [None] * (width - len(z)) for z in recall_z],
        "text": [t + [""] * (width - len(t)) for t in recall_text],
        "zmin": 0,
        "zmax": 1,
        "colorscale": [[0, "#e8a0a0"], [1, "#8fd18f"]],
        "hovertemplate": "%{y}<br>%{text}: %{z}<extra>1 = fact found</extra>",
        "showscale": False,
    }
    return [
        plot_figure(
            "TTFT against context (the conversation ramp)",
            lines,
            xaxis={"title": {"text": "context tokens"}, **ticks(spread(contexts), tokens)},
            yaxis={"title": {"text": "TTFT s"}},
        ),
        plot_figure(
            "Recall per turn (green: the planted fact was found)",
            [heat],
            height=120 + 28 * len(recall_rows),
            xaxis={"type": "category"},
            yaxis={"type": "category", "automargin": True, "autorange": "reversed"},
        ),
    ]


def _decode_figure(rows: Sequence[Row]) -> list[dict[str, Any]]:
    decoded = [r for r in rows if r.decode_alone.value is not None]
    if not decoded:
        return []
    names = [r.deployment for r in decoded]
    bars = [
        {"type": "bar", "name": "alone", "x": names, "y": [r.decode_alone.value for r in decoded]},
        {
            "type": "bar",
            "name": "with a second user",
            "x": names,
            "y": [r.decode_shared.value for r in decoded],
        },
    ]
    return [
        plot_figure(
            "Last-turn decode alone against with a second user",
            bars,
            barmode="group",
            yaxis={"title": {"text": "tokens/s (slowest user)"}},
        )
    ]


def _timeline_figures(results: Path, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Each run's ramp with two users at once, as a timeline: where one user's decode slows while the other
    prefills, with the GPU underneath when the run sampled it."""
    out = []
    for row in rows:
        path = results / "runs" / row.run_id
        if not (path / MANIFEST_FILE).exists():
            continue
        records = [r for r in RunDir(path).records() if r.check == "ramp" and r.labels.get("users") == "2"]
        telemetry = read_telemetry(path / TELEMETRY_FILE)
        gpu = [s for s in telemetry.samples if s.check == "ramp"] if telemetry else []
        drawn = timeline(records, gpu)
        if drawn is not None:
            figure = timeline_figure(drawn, f"{row.deployment}: two users, prefill and decode")
            layout = {
                **LAYOUT,
                **figure["layout"],
                "title": {**TITLE, **figure["layout"]["title"]},
                "xaxis": {**AXIS, **figure["layout"]["xaxis"]},
            }
            figure["layout"] = {**layout, **legend_below(figure["data"], layout)}
            out.append(figure)
    return out


def _telemetry_figures(results: Path, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Each run's GPU telemetry over the whole run, each check a shaded band named at its top."""
    out = []
    for row in rows:
        telemetry = read_telemetry(results / "runs" / row.run_id / TELEMETRY_FILE)
        if telemetry is None or not telemetry.samples:
            continue
        instants = by_instant(telemetry.samples)
        series = gpu_series(instants, instants[0][0].t_ns)
        bands, shapes, notes = _check_bands(series.seconds, series.checks), [], []
        for k, (check, start, end) in enumerate(bands):
            shapes.append(
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "paper",
                    "x0": start,
                    "x1": end,
                    "y0": 0,
                    "y1": 1,
                    "fillcolor": "#1f77b4" if k % 2 else "#ff7f0e",
                    "opacity": 0.08,
                    "line": {"width": 0},
                }
            )
            notes.append(
                {"x": start, "y": 1, "xref": "x", "yref": "paper", "text": check, "showarrow": False}
            )
        names = ", ".join(telemetry.gpu_names())
        out.append(
            plot_figure(
                f"{row.deployment}: GPU over the run ({names})",
                gpu_traces(series, "y", "y2"),
                xaxis={"title": {"text": "seconds since the first sample"}},
                shapes=shapes,
                annotations=notes,
                **gpu_axes([0.0, 1.0], "yaxis", "yaxis2"),
            )
        )
    return out


def _check_bands(seconds: Sequence[float], checks: Sequence[str]) -> list[tuple[str, float, float]]:
    """(check, first second, last second) of each stretch of points taken in one check."""
    bands: list[tuple[str, float, float]] = []
    for second, check in zip(seconds, checks, strict=True):
        if bands and bands[-1][0] == check:
            bands[-1] = (check, bands[-1][1], second)
        else:
            bands.append((check, second, second))
    return [band for band in bands if band[0] != BETWEEN_CHECKS]


def interactive_figures(results: Path, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Every figure the rows have data for, as Plotly figure dicts."""
    runs = [PageRun(row.deployment, row.run_id) for row in rows]
    return (
        _ramp_figures(results, rows)
        + _decode_figure(rows)
        + _timeline_figures(results, rows)
        + [f for check in CHECKS if check.own_report for f in check.figures(results, runs)]
        + _telemetry_figures(results, rows)
    )


def figures_json(figures: list[dict[str, Any]]) -> str:
    """The figures as JSON that is safe inside a <script> element."""
    return json.dumps(figures).replace("</", "<\\/")
