"""The evidence page's figures of many users: each deployment's closed-loop levels (output tokens/s and
TTFT p50 by users), its open-loop rates (TTFT p99 by the offered rate) and, beside them, the MLPerf
Endpoints front (`endpoints.pareto_figure`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...render.figure_layout import PageRun, interval_bars, plot_figure, ticks
from .endpoints import pareto_figure
from .file import ThroughputFile


def figures(results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    return many_users_figures(results, runs) + pareto_figure(results, runs)


def many_users_figures(results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    closed: list[dict[str, Any]] = []
    latency: list[dict[str, Any]] = []
    rates: list[dict[str, Any]] = []
    for row in runs:
        data = ThroughputFile.load(results / "runs" / row.run_id)
        if data is None:
            continue
        levels = data.levels_sorted()
        if levels:
            users = [u for u, _ in levels]
            closed.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": row.deployment,
                    "x": users,
                    "y": [level.output_tokens_per_s for _, level in levels],
                }
            )
            latency.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": row.deployment,
                    "x": users,
                    "y": [level.ttft_s.p50 for _, level in levels],
                    **interval_bars([(level.ttft_s.p50, level.ttft_s.p50_ci) for _, level in levels]),
                }
            )
        offered = [
            (rate, line)
            for rate, line in data.rates_sorted()
            if line.skipped is None and line.ttft_s.p99 is not None
        ]
        if offered:
            rates.append(
                {
                    "type": "scatter",
                    "name": row.deployment,
                    "x": [rate for rate, _ in offered],
                    "y": [line.ttft_s.p99 for _, line in offered],
                    **interval_bars([(line.ttft_s.p99, line.ttft_s.p99_ci) for _, line in offered]),
                    "text": ["saturated" if line.saturated else "kept up" for _, line in offered],
                    "mode": "lines+markers+text",
                    "textposition": "top center",
                    "marker": {
                        "symbol": ["x" if line.saturated else "circle" for _, line in offered],
                        "size": [12 if line.saturated else 8 for _, line in offered],
                    },
                    "hovertemplate": "%{x} req/s offered: TTFT p99 %{y:.2f} s, %{text}",
                }
            )
    out = []
    if closed:
        users_seen: list[float] = [u for line in closed for u in line["x"]]
        axis = {"title": {"text": "users (closed loop)"}, **ticks(users_seen)}
        out.append(
            plot_figure(
                "Many users: output tokens/s", closed, xaxis=axis, yaxis={"title": {"text": "tokens/s"}}
            )
        )
        out.append(plot_figure("Many users: TTFT p50", latency, xaxis=axis, yaxis={"title": {"text": "s"}}))
    if rates:
        offered_all: list[float] = [x for line in rates for x in line["x"]]
        out.append(
            plot_figure(
                "Open loop: TTFT p99 against the offered rate (x: saturated)",
                rates,
                xaxis={"title": {"text": "requests/s offered"}, **ticks(offered_all)},
                yaxis={"title": {"text": "TTFT p99 s"}},
            )
        )
    return out
