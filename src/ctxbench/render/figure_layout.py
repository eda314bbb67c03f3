"""The evidence page's figure layout: one look for every Plotly figure, readable at 800 px (legends in rows
under the plot, titles in the top margin, axes that make room for their labels, log axes labelled at the
values themselves)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from ..measure.telemetry import GpuSeries
from .cell import Cell


# Legends sit in a row under the plot (at 800 px one beside it took a third of the width); the title sits in
# the top margin, left, clear of the plot and of the figure above; axes make room for their labels.
class PageRun(NamedTuple):
    """A run the evidence page draws: its deployment's name (the figure's legend), its run id and its
    evidence cells by column key (the checks' own, `Row.own`)."""

    deployment: str
    run_id: str
    cells: Mapping[str, Cell] = MappingProxyType({})


LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
    "height": 420,
    "template": "plotly_white",
}
LEGEND = {"orientation": "h", "x": 0, "xanchor": "left"}
LEGEND_ROW_PX = 22  # one row of the legend under the plot, two entries a row at 800 px
AXIS = {"automargin": True}
TITLE = {"x": 0, "xanchor": "left", "xref": "container", "y": 1, "yref": "container", "yanchor": "top"}
TITLE["pad"] = {"t": 12, "l": 12}


def plot_figure(title: str, data: list[dict[str, Any]], **layout: Any) -> dict[str, Any]:
    axes = {key: {**AXIS, **layout.get(key, {})} for key in ("xaxis", "yaxis")}
    merged = {**LAYOUT, **layout, **axes, "title": {**TITLE, "text": title}}
    return {"data": data, "layout": {**merged, **legend_below(data, merged)}}


def legend_below(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """The legend in rows at the foot of the figure, the figure taller by as many rows: beside the plot it
    took a third of an 800 px page, and under the axis (in the plot's own units) it covered the axis title."""
    entries = {
        trace.get("legendgroup") or trace.get("name")
        for trace in data
        if trace.get("name") and trace.get("showlegend", True) and trace.get("type") != "heatmap"
    }
    if len(entries) < 2:
        return {"showlegend": False} if entries else {}
    room = LEGEND_ROW_PX * -(-len(entries) // 2) + 16
    margin = layout.get("margin", {})
    return {
        "legend": {
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "y": 0,
            "yanchor": "bottom",
            "yref": "container",
        },
        "margin": {**margin, "b": margin.get("b", 40) + room},
        "height": layout.get("height", 420) + room,
    }


def ticks(values: Sequence[float], label: Callable[[float], str] = lambda v: f"{v:g}") -> dict[str, Any]:
    """A log axis labelled at the values themselves (users 1, 2, 4; 0.5 and 8 requests/s): Plotly's own
    log ticks label 2..9 between decades, and one point gets none."""
    ticks = sorted(set(values))
    if not ticks:  # nothing drawn (every turn failed): Plotly's own axis
        return {"type": "log"}
    return {"type": "log", "tickvals": ticks, "ticktext": [label(v) for v in ticks]}


def tokens(value: float) -> str:
    """8192 -> 8K, 1048576 -> 1M (the units the campaign files use)."""
    for size, unit in ((1 << 20, "M"), (1 << 10, "K")):
        if value >= size and value % (size // 4) == 0:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


def spread(values: Sequence[float]) -> list[float]:
    """Powers of two from the smallest value to the largest, at most eight of them (a log axis's labels)."""
    if not values:
        return []
    low, high = min(values), max(values)
    power = 1 << max(0, int(low).bit_length() - 1)
    ticks = []
    while power <= high * 1.01:
        if power >= low * 0.99:
            ticks.append(float(power))
        power *= 2
    while len(ticks) > 8:
        ticks = ticks[::2]
    return ticks or [float(low)]


def interval_bars(
    points: Sequence[tuple[float | None, tuple[float | None, float | None] | None]],
) -> dict[str, Any]:
    """Plotly error bars for percentiles from their 95% intervals (an end too few requests give is drawn
    as none); nothing for figures recorded before the intervals were."""
    if not any(ci is not None for _, ci in points):
        return {}

    def reach(value: float | None, end: float | None) -> float | None:
        return None if value is None or end is None else abs(end - value)

    return {
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": [reach(v, ci[1] if ci else None) for v, ci in points],
            "arrayminus": [reach(v, ci[0] if ci else None) for v, ci in points],
        }
    }


def gpu_traces(series: GpuSeries, memory_axis: str, power_axis: str) -> list[dict[str, Any]]:
    """GPU memory (GiB) on one axis, power (W) and SM utilisation (%) on another, over time."""
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "fill": "tozeroy",
            "name": "GPU memory GiB (largest)",
            "yaxis": memory_axis,
            "line": {"color": "#7570b3", "width": 0.8},
            "x": series.seconds,
            "y": series.memory_gib,
            "customdata": series.checks,
            "hovertemplate": "%{x:.1f} s (%{customdata}): %{y:.1f} GiB<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "GPU power W",
            "yaxis": power_axis,
            "line": {"color": "#e7298a", "width": 0.8},
            "x": series.seconds,
            "y": series.power_w,
            "hovertemplate": "%{x:.1f} s: %{y:.0f} W<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "SM utilisation %",
            "yaxis": power_axis,
            "line": {"color": "#666666", "width": 0.6, "dash": "dot"},
            "x": series.seconds,
            "y": series.sm_util_pct,
            "hovertemplate": "%{x:.1f} s: %{y:.0f}% SM<extra></extra>",
        },
    ]


def gpu_axes(domain: list[float], memory: str = "yaxis3", power: str = "yaxis4") -> dict[str, Any]:
    anchor = memory.replace("yaxis", "y")
    return {
        memory: {"domain": domain, "title": {"text": "GiB"}, "rangemode": "tozero"},
        power: {"overlaying": anchor, "side": "right", "title": {"text": "W / %"}, "rangemode": "tozero"},
    }
