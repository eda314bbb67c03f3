"""The run report's agent-sessions section: per level of concurrent sessions, what their returning turns found
cached and what the gaps cost, the planner's forecast beside each level, hit ratio against the gap, and the
figures (hit ratio against sessions with the forecast drawn in; hit ratio against the gap)."""

from __future__ import annotations

from pathlib import Path

from ...render.run_read import RunRead
from ...render.tables import fmt, markdown_table, recorded_text, relative
from .cell import forecast_of, forecast_words, gaps_words, summary_words, traced_gaps_words
from .file import HELD_SHARE, SessionsFile
from .forecast import SessionsForecast

COLUMNS = [
    "sessions",
    "turns",
    "failed",
    "returning turns",
    f"held (>= {HELD_SHARE:.0%})",
    "hit ratio",
    "re-prefill tok",
    "TTFT first p50 s",
    "TTFT returning p50 s",
    "longest prompt tok",
    "mean gap s",
    "holds",
    "forecast",
]


def _forecast_cell(forecast: SessionsForecast | None, sessions: int) -> str:
    return "n/a" if forecast is None else "holds" if forecast.holds(sessions) else "falls"


def counted(forecast: SessionsForecast | None) -> str:
    """What the forecast counted a session as: the context a returning turn needs found (llama.cpp's host
    cache), or the whole session (a block pool)."""
    if forecast is None:
        return ""
    return f", counting {forecast.session_tokens} tokens a session (`checks.sessions.forecast`)"


def _what_ran(data: SessionsFile) -> str:
    """The levels the parameters asked for, or, for a replayed trace, the trace and what was sent of it (its
    sessions, turns, prompts and gaps as the records hold them; the parameters' turns and gaps never ran)."""
    spec = data.spec
    if not spec.get("trace"):
        return (
            f"Levels of {', '.join(map(str, spec['sessions']))} sessions at once, each up to {spec['turns']} "
            f"turns over a {spec['system_tokens']}-token system prompt shared within its level, each turn "
            f"adding {spec['turn_tokens']} new tokens and a reply of {spec['max_tokens']}, with "
            f"{gaps_words(spec)} between turns."
        )
    sessions = {(t.sessions, t.session) for t in data.turns}
    prompts = [t.prompt_tokens for t in data.turns if t.prompt_tokens is not None]
    sizes = f", prompts of {min(prompts)}-{max(prompts)} tokens" if prompts else ""
    return (
        f"A recorded trace replayed at its own times: `{spec['trace']}` "
        f"({spec.get('trace_format', 'sessions')}), {len(sessions)} sessions, {len(data.turns)} turns"
        f"{sizes}, {traced_gaps_words(data)} between turns as sent."
    )


def sessions_section(read: RunRead) -> list[str]:
    run = read.run
    data = SessionsFile.load(run.path)
    if data is None or not data.levels:
        return []
    spec = data.spec
    forecast = forecast_of(run, data)
    rows = []
    for level in data.levels:
        mine = [t for t in data.turns if t.sessions == level.sessions and t.ok]
        rows.append(
            [
                str(level.sessions),
                str(level.turns),
                str(level.failed),
                str(level.returning),
                "not reported" if level.held_turns is None else str(level.held_turns),
                "not reported" if level.hit_ratio is None else f"{level.hit_ratio:.0%}",
                "not reported" if level.reprefill_tokens is None else str(level.reprefill_tokens),
                recorded_text(level.ttft_first_s, 0.5, None, [t.ttft_s for t in mine if t.turn == 1]),
                recorded_text(level.ttft_return_s, 0.5, None, [t.ttft_s for t in mine if t.turn > 1]),
                "n/a" if level.longest_context is None else str(level.longest_context),
                fmt(level.mean_gap_s, 2),
                "not reported" if level.holds is None else "yes" if level.holds else "no",
                _forecast_cell(forecast, level.sessions),
            ]
        )
    scaled = (
        f" Gaps are compressed by the time scale x{spec['time_scale']:g}: a real session idles "
        f"{1 / spec['time_scale']:g} times longer."
        if spec["time_scale"] != 1
        else " Gaps are real time."
    )
    lines = [
        "",
        "## Agent sessions",
        "",
        f"{_what_ran(data)}{scaled} A returning turn's hit ratio is its cached tokens over its whole "
        f"previous context (prompt and reply as the server counted them); a level holds at "
        f"{spec['hit_threshold']:.0%}. TTFT medians with their 95% intervals (docs/metrics.md, "
        '"Intervals").',
        f"- Measured: {summary_words(data)}.",
        f"- {forecast_words(forecast)[0].upper()}{forecast_words(forecast)[1:]}{counted(forecast)}.",
        "- Which tier served a returning turn (GPU, host RAM, recomputed): not reported; neither llama.cpp "
        "nor vLLM says so per request. Its TTFT beside the first turns' tells a restore from a recompute.",
        "",
        markdown_table(rows, COLUMNS),
    ]
    by_gap = data.hit_by_gap()
    if by_gap:
        lines += [
            "",
            markdown_table([[g, str(n), f"{h:.0%}"] for g, n, h in by_gap], ["gap", "turns", "hit ratio"]),
        ]
    figure = draw_sessions(data, forecast, run.path / "sessions")
    if figure is not None:
        lines += [
            "",
            f"Hit ratio against sessions (the forecast's last level that holds dashed) and against each "
            f"returning turn's gap: ![sessions]({figure.name}) ({figure.stem}.svg).",
        ]
    lines.append(
        f"\nSource: `{relative(SessionsFile.path_in(run.path))}` and `{relative(run.requests_path)}` "
        "(`labels.check = sessions`)."
    )
    return lines


def draw_sessions(data: SessionsFile, forecast: SessionsForecast | None, stem: Path) -> Path | None:
    """`stem`.png and .svg: hit ratio per level (the forecast's held level dashed), and per returning turn
    against its gap; None where no cached tokens were reported."""
    levels = [level for level in data.levels if level.hit_ratio is not None]
    turns = [t for t in data.turns if t.hit is not None and t.gap_s is not None]
    if not levels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "ctxbench"  # the same ids each time: a rebuilt SVG is identical
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    left.plot([level.sessions for level in levels], [level.hit_ratio for level in levels], marker="o")
    if forecast is not None and forecast.held is not None:
        left.axvline(forecast.held, linestyle="--", color="grey", label=f"forecast holds {forecast.held}")
        left.legend(fontsize=7)
    left.set_xticks([level.sessions for level in levels])
    left.set_xlabel("sessions at once")
    left.set_ylabel("returning turns' hit ratio")
    left.set_ylim(-0.05, 1.05)
    for sessions in sorted({t.sessions for t in turns}):
        mine = [t for t in turns if t.sessions == sessions]
        label = f"{sessions} session{'s' * (sessions != 1)}"
        right.scatter([t.gap_s for t in mine], [t.hit for t in mine], s=12, label=label)
    # from no gap at all: a fixed gap is one column, not a zoom on its jitter
    right.set_xlim(0, 1.15 * max((t.gap_s or 0.0 for t in turns), default=0.0) or 1.0)
    right.set_xlabel("gap before the turn, s")
    right.set_ylabel("hit ratio")
    right.set_ylim(-0.05, 1.05)
    if turns:
        right.legend(fontsize=7, loc="center left")
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"))
    fig.savefig(stem.with_suffix(".svg"), metadata={"Date": None})  # no date: a rebuilt report is identical
    plt.close(fig)
    return stem.with_suffix(".png")
