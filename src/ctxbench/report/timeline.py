"""The ramp timeline: per user, prefill bars and decode bars on one time axis, with the decode rate
drawn over the decode bars, so that a reader sees one user's decode slow while another prefills.
Written as PNG and SVG, from records alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..records import RequestRecord

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


def draw_timeline(records: Sequence[RequestRecord], stem: Path, title: str) -> list[Path]:
    """Draw `stem`.png and `stem`.svg; records carry `user` and `turn` labels. Returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = [r for r in records if "user" in r.labels]
    if not drawn:
        return []
    t0 = min(r.sent_ns for r in drawn)
    users = sorted({int(r.labels["user"]) for r in drawn})
    bin_s = max(RATE_BIN_S, (max(r.end_ns for r in drawn) - t0) / NS / 400)
    fig, axes = plt.subplots(len(users), 1, figsize=(11, 1.9 * len(users) + 1.0), sharex=True, squeeze=False)
    for axis, user in zip(axes[:, 0], users):
        mine = [r for r in drawn if int(r.labels["user"]) == user]
        rate_axis = axis.twinx()
        for record in mine:
            first = record.chunks[0].arrived_ns if record.chunks else record.end_ns
            last = record.chunks[-1].arrived_ns if record.chunks else first
            axis.barh(0, (first - record.sent_ns) / NS, left=(record.sent_ns - t0) / NS, height=0.5,
                      color=PREFILL_COLOUR, edgecolor="black", linewidth=0.3)
            axis.barh(0, (last - first) / NS, left=(first - t0) / NS, height=0.5, color=DECODE_COLOUR,
                      edgecolor="black", linewidth=0.3)
            axis.text((record.sent_ns - t0) / NS, 0.33, f"t{record.labels.get('turn', '?')}", fontsize=7)
            xs, ys = decode_rate_series(record, bin_s, t0)
            rate_axis.plot(xs, ys, color="black", linewidth=0.8)
        axis.set_yticks([])
        axis.set_ylabel(f"user {user}", rotation=0, labelpad=28)
        axis.set_ylim(-0.5, 0.5)
        rate_axis.set_ylabel("decode tok/s", fontsize=8)
        rate_axis.set_ylim(bottom=0)
    axes[-1, 0].set_xlabel("seconds since the first request")
    handles = [plt.Rectangle((0, 0), 1, 1, color=PREFILL_COLOUR), plt.Rectangle((0, 0), 1, 1, color=DECODE_COLOUR),
               plt.Line2D([0], [0], color="black", linewidth=0.8)]
    fig.legend(handles, ["prefill (send -> first token)", "decode (first -> last token)", "decode rate"],
               loc="upper right", fontsize=8, ncols=3)
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return paths
