"""Two runs' many users side by side: at each concurrency level both measured, per-request TTFT, TPOT and
decode rate (medians with 95% bootstrap intervals) and whether the difference is established."""

from __future__ import annotations

from pathlib import Path

from ...measure import metrics, stats
from ...store.run_dir import RunDir
from .file import ThroughputFile

PER_REQUEST = (
    ("TTFT s", metrics.ttft_s, 3),
    ("TPOT s", metrics.tpot_s, 4),
    ("decode tok/s a user", metrics.decode_rate, 1),
)


def throughput_comparison(results: Path, run_a: str, run_b: str) -> list[tuple[str, str, str, str]]:
    """At each concurrency level both runs measured: the median of per-request TTFT, TPOT and decode rate
    with 95% bootstrap intervals, and whether the difference is established (intervals apart)."""
    levels = []
    for run_id in (run_a, run_b):
        data = ThroughputFile.load(results / "runs" / run_id)
        levels.append(data.levels if data is not None else {})
    rows = []
    for users in sorted(set(levels[0]) & set(levels[1]), key=int):
        records = []
        for run_id, level in zip((run_a, run_b), levels, strict=True):
            wanted = set(level[users].request_ids)
            records.append(
                [r for r in RunDir(results / "runs" / run_id).records() if r.request_id in wanted and r.ok]
            )
        for label, formula, digits in PER_REQUEST:
            a, b = (
                stats.median_interval(
                    [v for r in side if (v := formula(r)) is not None], seed=f"{users}-{label}"
                )
                for side in records
            )
            rows.append(
                (
                    f"{users} users: {label} (median [95%])",
                    a.text(digits) if a else "n/a",
                    b.text(digits) if b else "n/a",
                    stats.verdict(a, b),
                )
            )
    return rows
