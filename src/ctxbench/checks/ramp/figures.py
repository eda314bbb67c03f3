"""The evidence page's figures of claim 3 (TTFT against context and recall per turn from the ramp's rows, the
last turn's decode alone against with a second user, each run's 2-user timeline) and the Markdown report's
static PNGs of the same (`report_figures`)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...measure.telemetry import TELEMETRY_FILE, read_telemetry
from ...render.figure_layout import (
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
from ...store.run_dir import RunDir
from ...store.run_files import MANIFEST_FILE
from .labels import RampLabels
from .section import ramp_table_rows
from .timeline import timeline, timeline_figure


def figures(results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    return _ramp_figures(results, runs) + _decode_figure(runs) + _timeline_figures(results, runs)


def _value(run: PageRun, key: str) -> float | None:
    cell = run.cells.get(key)
    return None if cell is None else cell.value


def _ramp_figures(results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    recall_rows: list[str] = []
    recall_z: list[list[int | None]] = []
    recall_text: list[list[str]] = []
    for row in runs:
        run = results / "runs" / row.run_id
        if not (run / MANIFEST_FILE).exists():
            continue
        ramp = ramp_table_rows(RunDir(run))
        for users in sorted({r.users for r in ramp}, key=int):
            setting = [r for r in ramp if r.users == users]
            for user in sorted({r.user for r in setting}, key=int):
                mine = sorted((r for r in setting if r.user == user), key=lambda r: r.turn_number)
                name = f"{row.deployment}, {users} user{'s' if users != '1' else ''}: user {user}"
                timed = [r for r in mine if r.ttft_s]
                lines.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": name,
                        "x": [r.context for r in timed],
                        "y": [float(r.ttft_s) for r in timed],
                        "hovertemplate": "%{x} tokens: TTFT %{y:.2f} s<extra>" + name + "</extra>",
                    }
                )
                recall_rows.append(name)
                recall_z.append([r.found for r in mine])
                recall_text.append([f"turn {r.turn}, {r.context_tokens} tokens" for r in mine])
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


def _decode_figure(runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    decoded = [r for r in runs if _value(r, "decode_alone") is not None]
    if not decoded:
        return []
    names = [r.deployment for r in decoded]
    bars = [
        {"type": "bar", "name": "alone", "x": names, "y": [_value(r, "decode_alone") for r in decoded]},
        {
            "type": "bar",
            "name": "with a second user",
            "x": names,
            "y": [_value(r, "decode_shared") for r in decoded],
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


def _timeline_figures(results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
    """Each run's ramp with two users at once, as a timeline: where one user's decode slows while the other
    prefills, with the GPU underneath when the run sampled it."""
    out = []
    for row in runs:
        path = results / "runs" / row.run_id
        if not (path / MANIFEST_FILE).exists():
            continue
        records = [r for r in RunDir(path).records() if r.check == "ramp" and RampLabels.of(r).users == 2]
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


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def report_figures(results: Path, runs: Sequence[PageRun]) -> list[tuple[str, str, bytes]]:
    """For the Markdown report: TTFT against context and recall per turn (the ramp's rows), and decode alone
    against with 2 users; (caption, file name, PNG). The HTML page draws these interactively."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: list[tuple[str, str, bytes]] = []
    ramp = [
        r
        for row in runs
        if (results / "runs" / row.run_id / MANIFEST_FILE).exists()
        for r in ramp_table_rows(RunDir(results / "runs" / row.run_id))
    ]
    if ramp:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
        for row in runs:
            for users, style in (("1", "-o"), ("2", "--x")):
                setting = [r for r in ramp if r.run_id == row.run_id and r.users == users and r.ttft_s]
                for user in sorted({r.user for r in setting}):
                    mine = [r for r in setting if r.user == user]
                    label = f"{row.deployment} ({users} user{'s' if users != '1' else ''}: user {user})"
                    left.plot(
                        [r.context for r in mine],
                        [float(r.ttft_s) for r in mine],
                        style,
                        label=label,
                        markersize=3,
                    )
                    right.plot(
                        [r.turn_number for r in mine],
                        [int(r.recall or 0) for r in mine],
                        style,
                        markersize=3,
                    )
        left.set_xlabel("context tokens")
        left.set_ylabel("TTFT s")
        left.set_title("TTFT against context (ramp)")
        if left.get_legend_handles_labels()[0]:  # a ramp whose every turn failed drew no line
            left.legend(fontsize=7)
        right.set_title("recall per turn (1 = fact found)")
        right.set_xlabel("turn")
        fig.tight_layout()
        out.append(("TTFT against context, and recall per turn", "ttft-and-recall.png", _png(fig)))
        plt.close(fig)
        decoded = [r for r in runs if _value(r, "decode_alone") is not None]
        if decoded:
            fig, axis = plt.subplots(figsize=(7, 3.2))
            xs = range(len(decoded))
            axis.bar(
                [x - 0.2 for x in xs], [_value(r, "decode_alone") or 0 for r in decoded], 0.4, label="alone"
            )
            axis.bar(
                [x + 0.2 for x in xs],
                [_value(r, "decode_shared") or 0 for r in decoded],
                0.4,
                label="with 2 users",
            )
            axis.set_xticks(list(xs), [r.deployment for r in decoded], fontsize=7)
            axis.set_ylabel("last-turn decode tok/s (slowest user)")
            axis.legend(fontsize=7)
            fig.tight_layout()
            out.append(("Decode rate alone against with a second user", "decode.png", _png(fig)))
            plt.close(fig)
    return out
