"""The ramp timeline: per user, prefill bars and decode bars on one time axis, with the decode rate
drawn over the decode bars, so that a reader sees one user's decode slow while another prefills; where
the run sampled its GPUs, their memory, power and SM utilisation are drawn underneath on the same axis
(both clocks are the process's `perf_counter_ns`). Drawn from the run's files alone, twice from the same
spans: as PNG and SVG for the Markdown report, and as a Plotly figure for the evidence page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...measure.telemetry import GpuSample, GpuSeries, by_instant, gpu_series
from ...records import RequestRecord
from ...render.figure_layout import gpu_axes, gpu_traces
from .labels import RampLabels

NS = 1e9
PREFILL_COLOUR = "#d95f02"
DECODE_COLOUR = "#1b9e77"
RATE_BIN_S = 0.25


def decode_rate_series(record: RequestRecord, bin_s: float, t0_ns: int) -> tuple[list[float], list[float]]:
    """(bin centre seconds from t0, chunks per second in that bin) over the record's decode interval."""
    chunks = record.chunks
    if len(chunks) < 2:
        return [], []
    start = chunks[0].arrived_ns
    bins = max(1, int((chunks[-1].arrived_ns - start) / NS / bin_s) + 1)
    counts = [0] * bins
    for chunk in chunks[1:]:
        counts[min(bins - 1, int((chunk.arrived_ns - start) / NS / bin_s))] += 1
    centres = [(start - t0_ns) / NS + (i + 0.5) * bin_s for i in range(bins)]
    return centres, [c / bin_s for c in counts]


@dataclass(frozen=True)
class Span:
    """One request on the timeline, in seconds since the first request was sent."""

    user: int
    turn: str
    context_tokens: str  # the turn's planned prompt length, "" when the record does not say
    sent_s: float
    first_s: float  # first token (the end of prefill)
    last_s: float  # last token
    rate_s: list[float]  # decode-rate bins: centres
    rate_per_s: list[float]  # and chunks a second in each


@dataclass(frozen=True)
class Timeline:
    spans: list[Span]
    users: list[int]
    gpu: GpuSeries | None  # the samples inside the requests' span, None when there are none


def timeline(records: Sequence[RequestRecord], gpu: Sequence[GpuSample] = ()) -> Timeline | None:
    """The spans of the records that carry a `user` label, and the GPU samples taken meanwhile; None when
    no record does."""
    drawn = [(r, labels) for r in records if (labels := RampLabels.of(r)).user is not None]
    if not drawn:
        return None
    t0 = min(r.sent_ns for r, _ in drawn)
    t1 = max(r.end_ns for r, _ in drawn)
    bin_s = max(RATE_BIN_S, (t1 - t0) / NS / 400)
    spans = []
    for record, labels in drawn:
        first = record.chunks[0].arrived_ns if record.chunks else record.end_ns
        last = record.chunks[-1].arrived_ns if record.chunks else first
        xs, ys = decode_rate_series(record, bin_s, t0)
        spans.append(
            Span(
                user=labels.user or 0,
                turn=str(labels.turn or "?"),
                context_tokens=str(record.planned_tokens or ""),
                sent_s=(record.sent_ns - t0) / NS,
                first_s=(first - t0) / NS,
                last_s=(last - t0) / NS,
                rate_s=xs,
                rate_per_s=ys,
            )
        )
    instants = [i for i in by_instant(gpu) if t0 <= i[0].t_ns <= t1]
    return Timeline(
        spans=spans,
        users=sorted({s.user for s in spans}),
        gpu=gpu_series(instants, t0) if instants else None,
    )


def draw_timeline(
    records: Sequence[RequestRecord], stem: Path, title: str, gpu: Sequence[GpuSample] = ()
) -> list[Path]:
    """Draw `stem`.png and `stem`.svg; records carry `user` and `turn` labels; `gpu` samples inside the
    records' span are drawn in a panel underneath. Returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = timeline(records, gpu)
    if drawn is None:
        return []
    rows = len(drawn.users) + (1 if drawn.gpu else 0)
    fig, axes = plt.subplots(rows, 1, figsize=(11, 1.9 * rows + 1.0), sharex=True, squeeze=False)
    if drawn.gpu:
        _draw_gpu(axes[-1, 0], drawn.gpu)
    for axis, user in zip(axes[:, 0], drawn.users, strict=False):  # the GPU panel, when drawn, is last
        rate_axis = axis.twinx()
        for span in (s for s in drawn.spans if s.user == user):
            for left, right, colour in (
                (span.sent_s, span.first_s, PREFILL_COLOUR),
                (span.first_s, span.last_s, DECODE_COLOUR),
            ):
                axis.barh(
                    0, right - left, left=left, height=0.5, color=colour, edgecolor="black", linewidth=0.3
                )
            axis.text(span.sent_s, 0.33, f"t{span.turn}", fontsize=7)
            rate_axis.plot(span.rate_s, span.rate_per_s, color="black", linewidth=0.8)
        axis.set_yticks([])
        axis.set_ylabel(f"user {user}", rotation=0, labelpad=28)
        axis.set_ylim(-0.5, 0.5)
        rate_axis.set_ylabel("decode tok/s", fontsize=8)
        rate_axis.set_ylim(bottom=0)
    axes[-1, 0].set_xlabel("seconds since the first request")
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=PREFILL_COLOUR),
        plt.Rectangle((0, 0), 1, 1, color=DECODE_COLOUR),
        plt.Line2D([0], [0], color="black", linewidth=0.8),
    ]
    fig.legend(
        handles,
        ["prefill (send -> first token)", "decode (first -> last token)", "decode rate"],
        loc="upper right",
        fontsize=8,
        ncols=3,
    )
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return paths


def timeline_figure(drawn: Timeline, title: str) -> dict[str, Any]:
    """The same timeline as a Plotly figure: bars per user (hover: turn, context, prefill and decode
    seconds), each user's decode rate underneath, and the GPU panel at the bottom when there is one."""
    bars: list[dict[str, Any]] = []
    spans = drawn.spans
    for name, colour, start, end, what in (
        ("prefill", PREFILL_COLOUR, "sent_s", "first_s", "prefill (send -> first token)"),
        ("decode", DECODE_COLOUR, "first_s", "last_s", "decode (first -> last token)"),
    ):
        bars.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": what,
                "legendgroup": name,
                "marker": {"color": colour, "line": {"color": "black", "width": 0.3}},
                "y": [f"user {s.user}" for s in spans],
                "base": [getattr(s, start) for s in spans],
                "x": [getattr(s, end) - getattr(s, start) for s in spans],
                "customdata": [[s.turn, s.context_tokens or "?"] for s in spans],
                "hovertemplate": "%{y}, turn %{customdata[0]} (%{customdata[1]} tokens): "
                + name
                + " %{x:.2f} s from %{base:.1f} s<extra></extra>",
            }
        )
    rates = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"user {user}: decode tok/s",
            "yaxis": "y2",
            "x": [x for s in drawn.spans if s.user == user for x in [*s.rate_s, None]],
            "y": [y for s in drawn.spans if s.user == user for y in [*s.rate_per_s, None]],
            "hovertemplate": "%{x:.1f} s: %{y:.0f} tok/s<extra>user " + str(user) + "</extra>",
        }
        for user in drawn.users
    ]
    gpu = gpu_traces(drawn.gpu, "y3", "y4") if drawn.gpu else []
    domains = ([0.62, 1.0], [0.34, 0.56], [0.0, 0.26]) if gpu else ([0.45, 1.0], [0.0, 0.38], None)
    layout: dict[str, Any] = {
        "barmode": "overlay",
        "height": 560 if gpu else 420,
        "xaxis": {"title": {"text": "seconds since the first request"}, "anchor": "y3" if gpu else "y2"},
        "yaxis": {"domain": domains[0], "type": "category", "autorange": "reversed"},
        "yaxis2": {"domain": domains[1], "title": {"text": "decode tok/s"}, "rangemode": "tozero"},
    }
    if gpu and domains[2] is not None:
        layout |= gpu_axes(domains[2])
    return {"data": bars + rates + gpu, "layout": {"title": {"text": title}, **layout}}


def _draw_gpu(axis, series: GpuSeries) -> None:
    """GPU memory (GiB, left axis), power (W) and SM utilisation (%, right axis) over time."""
    memory = [m or 0 for m in series.memory_gib]
    axis.fill_between(series.seconds, memory, color="#7570b3", alpha=0.35, linewidth=0)
    axis.set_ylabel("GPU memory GiB", fontsize=8)
    axis.set_ylim(bottom=0)
    right = axis.twinx()
    right.plot(series.seconds, series.power_w, color="#e7298a", linewidth=0.8, label="power W")
    right.plot(
        series.seconds, series.sm_util_pct, color="#666666", linewidth=0.6, linestyle=":", label="SM util %"
    )
    right.set_ylim(bottom=0)
    right.set_ylabel("W / %", fontsize=8)
    right.legend(loc="upper left", fontsize=7, ncols=2)
