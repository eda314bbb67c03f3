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
    PageRun,
    gpu_axes,
    gpu_traces,
    plot_figure,
)
from ..results.evidence import Row

# plotly.js's partial bundle of the cartesian traces (vendor/README.md): the page draws scatter, bar and
# heatmap only, and this is 1.5 MB where the full bundle is 4.8 MB.
PLOTLY_BUNDLE = Path(__file__).parent / "vendor" / "plotly-cartesian-4.1.1.min.js"
BUNDLE_TRACES = frozenset(
    ("bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour", "image", "pie")
    + ("scatter", "scatterternary", "violin")
)


def plotly_js() -> str:
    return PLOTLY_BUNDLE.read_text()


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
    runs = [PageRun(row.deployment, row.run_id, row.own) for row in rows]
    return [f for check in CHECKS for f in check.figures(results, runs)] + _telemetry_figures(results, rows)


def figures_json(figures: list[dict[str, Any]]) -> str:
    """The figures as JSON that is safe inside a <script> element."""
    return json.dumps(figures).replace("</", "<\\/")
