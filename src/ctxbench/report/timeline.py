"""The ramp timeline: per user, prefill bars and decode bars on one time axis, with the decode rate
drawn over the decode bars, so that a reader sees one user's decode slow while another prefills; where
the run sampled its GPUs, their memory, power and SM utilisation are drawn underneath on the same axis
(both clocks are the process's `perf_counter_ns`). Written as PNG and SVG, from the run's files alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..records import RequestRecord
from ..telemetry import GpuSample, by_instant

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


def draw_timeline(
    records: Sequence[RequestRecord], stem: Path, title: str, gpu: Sequence[GpuSample] = ()
) -> list[Path]:
    """Draw `stem`.png and `stem`.svg; records carry `user` and `turn` labels; `gpu` samples inside the
    records' span are drawn in a panel underneath. Returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = [r for r in records if "user" in r.labels]
    if not drawn:
        return []
    t0 = min(r.sent_ns for r in drawn)
    users = sorted({int(r.labels["user"]) for r in drawn})
    t1 = max(r.end_ns for r in drawn)
    bin_s = max(RATE_BIN_S, (t1 - t0) / NS / 400)
    instants = [i for i in by_instant(gpu) if t0 <= i[0].t_ns <= t1]
    rows = len(users) + (1 if instants else 0)
    fig, axes = plt.subplots(rows, 1, figsize=(11, 1.9 * rows + 1.0), sharex=True, squeeze=False)
    if instants:
        _draw_gpu(axes[-1, 0], instants, t0)
    for axis, user in zip(axes[:, 0], users, strict=False):  # the GPU panel, when drawn, is the last row
        mine = [r for r in drawn if int(r.labels["user"]) == user]
        rate_axis = axis.twinx()
        for record in mine:
            first = record.chunks[0].arrived_ns if record.chunks else record.end_ns
            last = record.chunks[-1].arrived_ns if record.chunks else first
            axis.barh(
                0,
                (first - record.sent_ns) / NS,
                left=(record.sent_ns - t0) / NS,
                height=0.5,
                color=PREFILL_COLOUR,
                edgecolor="black",
                linewidth=0.3,
            )
            axis.barh(
                0,
                (last - first) / NS,
                left=(first - t0) / NS,
                height=0.5,
                color=DECODE_COLOUR,
                edgecolor="black",
                linewidth=0.3,
            )
            axis.text((record.sent_ns - t0) / NS, 0.33, f"t{record.labels.get('turn', '?')}", fontsize=7)
            xs, ys = decode_rate_series(record, bin_s, t0)
            rate_axis.plot(xs, ys, color="black", linewidth=0.8)
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


def _draw_gpu(axis, instants: Sequence[Sequence[GpuSample]], t0: int) -> None:  # type: ignore[no-untyped-def]
    """GPU memory (GiB, left axis), power (W) and SM utilisation (%, right axis) over time."""
    xs = [(i[0].t_ns - t0) / NS for i in instants]
    memory = [sum(s.memory_used_bytes or 0 for s in i) / 2**30 for i in instants]
    axis.fill_between(xs, memory, color="#7570b3", alpha=0.35, linewidth=0)
    axis.set_ylabel("GPU memory GiB", fontsize=8)
    axis.set_ylim(bottom=0)
    right = axis.twinx()
    power = [sum(s.power_w or 0 for s in i) for i in instants]
    util = [sum(s.sm_util_pct or 0 for s in i) / len(i) for i in instants]
    right.plot(xs, power, color="#e7298a", linewidth=0.8, label="power W")
    right.plot(xs, util, color="#666666", linewidth=0.6, linestyle=":", label="SM util %")
    right.set_ylim(bottom=0)
    right.set_ylabel("W / %", fontsize=8)
    right.legend(loc="upper left", fontsize=7, ncols=2)
