"""The many-users check as MLPerf Endpoints reports a Pareto point, so a reader of MLPerf results can put
ctxbench's beside them. Definitions read in mlcommons/endpoints_policies `endpoints_rules.md` (v1.0 draft of
2026-05-05, commit 00135a0065aa2aa27ce4581a25bcd7b1c9a27c98, §4.1, §4.2, §5.2):

- `system_tps` = total output tokens / elapsed seconds of the measurement: a closed-loop level's output
  tokens over its window (first send to last end), as ctxbench's `output tok/s`;
- `tps_per_user` = 1000 / `tpot_p90_ms`, the P90 of per-response TPOT, ctxbench's TPOT ((E2E - TTFT) /
  (output - 1); the rules' text gives no other formula);
- `ttft_p90_ms` = P90 from issue to the first non-empty fragment of any kind (visible, tool call, reasoning):
  ctxbench's time to first visible text (`metrics.first_text_s`), beside ctxbench's TTFT (first token event);
- the Pareto curve: `system_tps` against `tps_per_user`, one point a concurrency, drawn as a step function
  through the points no other point beats on both axes.

What is not MLPerf's: ctxbench's levels are short (MLPerf asks 600 s a point in the 1-32 region and 1,200 s
above, at least 7 points over its regions), and the prompts are ctxbench's, not a benchmark's dataset.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...measure import metrics
from ...records import RequestRecord
from ...render.figure_layout import PageRun, plot_figure
from ...render.tables import fmt, markdown_table, percentile_text
from ...store.run_dir import RunDir
from .file import Level, ThroughputFile
from .labels import ThroughputLabels

RULES = "mlcommons/endpoints_policies endpoints_rules.md (v1.0 draft, 2026-05-05, commit 00135a0)"
MIN_POINTS = 7  # §5.3: 1 + 3 + 3
MIN_SECONDS = 600  # §6.2: the least steady-state time of a point (the 1-32 region)


@dataclass(frozen=True)
class EndpointsPoint:
    concurrency: int
    completed: int
    window_s: float
    system_tps: float | None
    tpot_p90_ms: float | None
    ttft_p90_ms: float | None  # to the first non-empty fragment (MLPerf's)
    ttft_token_p90_ms: float | None  # to the first token event (ctxbench's TTFT)

    @property
    def tps_per_user(self) -> float | None:
        return None if not self.tpot_p90_ms else 1000 / self.tpot_p90_ms


def _p90_text(values: Iterable[float | None]) -> str:
    """A P90 in milliseconds with its 95% interval (`tables.percentile_text`)."""
    return percentile_text([v * 1000 for v in values if v is not None], 0.9, 1)


def _p90_ms(values: Iterable[float | None]) -> float | None:
    """The P90 (NumPy's linear interpolation, as every ctxbench percentile) of the values present, in ms."""
    p90 = metrics.percentile([v for v in values if v is not None], 90)
    return None if p90 is None else p90 * 1000


def measured_records(level: Level, users: int, records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """A level's measured requests: its `request_ids`, or (runs recorded before those) its users' requests
    that were not warm-up."""
    if level.request_ids:
        wanted = set(level.request_ids)
        return [r for r in records if r.request_id in wanted]
    return [
        r
        for r in records
        if r.check == "throughput"
        and (labels := ThroughputLabels.of(r)).users == users
        and not r.warmup
        and labels.rate is None
    ]


def endpoints_points(data: ThroughputFile, records: Sequence[RequestRecord]) -> list[EndpointsPoint]:
    """One point per closed-loop level (search probes included), concurrency ascending."""
    points = []
    for users, level in data.levels_sorted():
        ok = [r for r in measured_records(level, users, records) if r.ok]
        points.append(
            EndpointsPoint(
                concurrency=users,
                completed=len(ok),
                window_s=level.window_s,
                system_tps=level.output_tokens_per_s,
                tpot_p90_ms=_p90_ms(metrics.tpot_s(r) for r in ok),
                ttft_p90_ms=_p90_ms(metrics.first_text_s(r) for r in ok),
                ttft_token_p90_ms=_p90_ms(metrics.ttft_s(r) for r in ok),
            )
        )
    return points


def pareto(points: Sequence[EndpointsPoint]) -> list[EndpointsPoint]:
    """The points no other beats on both `tps_per_user` and `system_tps`, by `tps_per_user` descending: the
    corners of MLPerf's step curve."""
    measured = [p for p in points if p.tps_per_user is not None and p.system_tps is not None]
    measured.sort(key=lambda p: (-(p.tps_per_user or 0), -(p.system_tps or 0)))
    front: list[EndpointsPoint] = []
    for point in measured:
        if not front or (point.system_tps or 0) > (front[-1].system_tps or 0):
            front.append(point)
    return front


def endpoints_lines(data: ThroughputFile, records: Sequence[RequestRecord], run_path: Path) -> list[str]:
    """The run report's MLPerf Endpoints view of the closed-loop levels: the table, the step figure (drawn
    beside the report) and what keeps them from being an MLPerf result."""
    points = endpoints_points(data, records)
    if not points:
        return []
    front = {p.concurrency for p in pareto(points)}
    rows = []
    for p, (users, level) in zip(points, data.levels_sorted(), strict=True):
        ok = [r for r in measured_records(level, users, records) if r.ok]
        rows.append(
            [
                str(p.concurrency),
                str(p.completed),
                fmt(p.window_s, 1),
                fmt(p.system_tps, 1),
                _p90_text(metrics.tpot_s(r) for r in ok),
                fmt(p.tps_per_user, 1),
                _p90_text(metrics.first_text_s(r) for r in ok),
                _p90_text(metrics.ttft_s(r) for r in ok),
                "yes" if p.concurrency in front else "no",
            ]
        )
    columns = [
        "concurrency",
        "completed",
        "window s",
        "system_tps",
        "tpot_p90_ms",
        "tps_per_user",
        "ttft_p90_ms (first non-empty)",
        "TTFT p90 ms (first token)",
        "on the Pareto front",
    ]
    short = [p for p in points if p.window_s < MIN_SECONDS]
    caveats = []
    if len(points) < MIN_POINTS:
        caveats.append(f"{len(points)} point(s), MLPerf asks at least {MIN_POINTS}")
    if short:
        caveats.append(f"{len(short)} point(s) shorter than the {MIN_SECONDS} s MLPerf asks of one")
    figure = draw_pareto(points, run_path / "endpoints-pareto")
    return [
        "",
        "### As MLPerf Endpoints reports it",
        "",
        f"Each closed-loop level as an MLPerf Endpoints Pareto point ({RULES}, §4.1): `system_tps` = output "
        "tokens over the level's window, `tps_per_user` = 1000 / `tpot_p90_ms` (the P90 of per-request "
        "TPOT), `ttft_p90_ms` to the first non-empty fragment of any kind, beside ctxbench's TTFT p90 to the "
        'first token event. The front is the step curve of §5.2 (docs/metrics.md, "MLPerf Endpoints"). '
        "Each P90 is followed by its 95% interval (an upper end needs 36 requests; MLPerf's early stopping "
        "asks 64). " + ("Not an MLPerf result: " + "; ".join(caveats) + "." if caveats else ""),
        "",
        markdown_table(rows, columns),
    ] + ([] if figure is None else ["", f"![the Pareto front]({figure.name}) ({figure.stem}.svg)"])


def draw_pareto(points: Sequence[EndpointsPoint], stem: Path) -> Path | None:
    """Draw `stem`.png and `stem`.svg: every point, and the front as a step function (no interpolation);
    the PNG's path, or None where no point has both figures."""
    front = pareto(points)
    if not front:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6, 4))
    shown = [(p.concurrency, p.tps_per_user, p.system_tps) for p in points]
    drawn = [(c, x, y) for c, x, y in shown if x is not None and y is not None]
    axis.scatter([x for _, x, _ in drawn], [y for _, _, y in drawn], color="0.6", zorder=2)
    steps = [(p.tps_per_user or 0.0, p.system_tps or 0.0) for p in front]
    axis.step([x for x, _ in steps], [y for _, y in steps], where="post", color="C0", zorder=3)
    for concurrency, x, y in drawn:
        axis.annotate(str(concurrency), (x, y), fontsize=7)
    axis.set_xlabel("tps_per_user (1000 / TPOT p90 ms)")
    axis.set_ylabel("system_tps (output tokens/s)")
    axis.set_title("MLPerf Endpoints view: a point per concurrency, the front as steps", fontsize=9)
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"))
    fig.savefig(stem.with_suffix(".svg"), metadata={"Date": None})  # no date: a rebuilt report is identical
    plt.close(fig)
    return stem.with_suffix(".png")


def pareto_figure(results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    """The evidence page's MLPerf Endpoints chart: system_tps against tps_per_user, a deployment's
    front as steps, each point named by its concurrency."""
    lines = []
    for row in runs:
        data = ThroughputFile.load(results / "runs" / row.run_id)
        if data is None or not data.levels:
            continue
        front = pareto(endpoints_points(data, list(RunDir(results / "runs" / row.run_id).records())))
        if front:
            lines.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers+text",
                    "line": {"shape": "hv"},
                    "name": row.deployment,
                    "x": [p.tps_per_user for p in front],
                    "y": [p.system_tps for p in front],
                    "text": [f"{p.concurrency} users" for p in front],
                    "textposition": "top center",
                }
            )
    if not lines:
        return []
    return [
        plot_figure(
            "As MLPerf Endpoints charts it: system tokens/s against tokens/s per user (the front, as steps)",
            lines,
            xaxis={"title": {"text": "tps_per_user (1000 / TPOT p90 ms)"}},
            yaxis={"title": {"text": "system_tps (output tokens/s)"}},
        )
    ]
