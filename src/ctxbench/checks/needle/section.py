"""The run report's claim-2 section: recall by length (every task together, as the evidence counts it), the
short-context control, and where a run asked more than the single literal fact, each task's recall by length
and depth as k/n with its Wilson 95% interval; with `depths = "curve"`, recall against depth drawn as a line
per task and length (PNG and SVG beside the report)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...measure.stats import wilson
from ...render.run_read import RunRead
from ...render.tables import fmt, markdown_table, relative
from ...store.counters import reported_text
from ...store.run_dir import RunDir
from ...store.run_files import NIAH_LOG
from .cell import CONTROL_FAILED
from .file import NeedleFile, NeedleTrial

CURVE_FILE = "recall-by-depth"
MULTI_DEPTH = (
    "multi_depth asks its questions in turn over one document per length: the first prompt is a fresh "
    "prefill, the later ones read the document back from the prefix cache (on purpose, left out of the cache "
    "audit), so their TTFTs are not those of separate prompts, and a model that answers one question may be "
    "helped by having read the document before; each answer is scored on its own"
)


def outcome(trial: NeedleTrial) -> str:
    """A needle question's outcome in a word: skipped, failed, yes (found) or no."""
    return "skipped" if trial.skipped else "failed" if trial.error else "yes" if trial.found else "no"


def recall_cells(trials: Sequence[NeedleTrial]) -> dict[tuple[str, int, float], tuple[int, int]]:
    """(task, length, depth) -> (found, scored) over the grid (the control left out)."""
    cells: dict[tuple[str, int, float], tuple[int, int]] = {}
    for t in trials:
        if t.control:
            continue
        k, n = cells.get((t.task, t.length, t.depth), (0, 0))
        cells[(t.task, t.length, t.depth)] = (k + int(t.found is True), n + int(t.found is not None))
    return cells


def share_text(k: int, n: int) -> str:
    """'k/n [low, high]' with the Wilson 95% interval; 'not scored' where nothing was."""
    interval = wilson(k, n)
    return "not scored" if interval is None else f"{k}/{n} [{interval.low:.2f}, {interval.high:.2f}]"


def needle_section(read: RunRead) -> list[str]:
    run = read.run
    needle = NeedleFile.load(run.path)
    if needle is None:
        return []
    tasks = needle.task_names()
    lines = ["", "## Claim 2, retrieval in a fresh document", ""]
    for task in tasks:
        control = needle.task_recall(task).control
        if control is not None:
            named = "" if tasks == ["single"] else f"{task}: "
            lines.append(
                f"- {named}control, {control.length} tokens: found {control.found}/{control.scored}"
                + (f" ({CONTROL_FAILED.format(length=control.length)})" if control.missed else "")
            )
    lines += [f"- {length} tokens: found {r.found}/{r.scored}" for length, r in needle.recall_sorted()]
    suspects = [t.request_id for t in needle.trials if t.cache_hit_suspected]
    if suspects:
        lines.append(f"- PREFIX-CACHE HIT SUSPECTED on fresh prompts: {', '.join(suspects)}")
    if tasks != ["single"]:
        lines += _by_task(needle)
    if needle.depth_curve:
        lines += _curve(needle, run.path)
    several = tasks != ["single"]
    lines += [
        "",
        markdown_table(
            [
                (
                    *((t.task,) if several else ()),
                    str(t.length) + (" (control)" if t.control else ""),
                    f"{t.depth:.2f}",
                    str(t.prompt_tokens or "n/a"),
                    reported_text(t.cached_tokens) + (" (reused)" if t.reuse else ""),
                    fmt(t.ttft_s),
                    outcome(t),
                    str(t.expected or ""),
                    (t.answer or t.skipped or t.error or "")[:60],
                )
                for t in needle.trials
            ],
            (
                *(("task",) if several else ()),
                "length",
                "depth",
                "prompt tok",
                "cached tok",
                "TTFT s",
                "found",
                "expected",
                "answer",
            ),
        ),
    ]
    lines.append(
        f"\nSource: `{relative(run.path / NIAH_LOG)}` and `{relative(NeedleFile.path_in(run.path))}`."
    )
    return lines


def _by_task(needle: NeedleFile) -> list[str]:
    """Each task's recall by length and depth, k/n [95%], and over its whole grid."""
    cells = recall_cells(needle.trials)
    rows = []
    for task in needle.task_names():
        mine = {key: kn for key, kn in cells.items() if key[0] == task}
        k, n = sum(kn[0] for kn in mine.values()), sum(kn[1] for kn in mine.values())
        rows.append((task, "all", "all", share_text(k, n)))
        rows += [
            (task, str(length), f"{depth:.2f}", share_text(*kn))
            for (_, length, depth), kn in sorted(mine.items(), key=lambda item: item[0][1:])
        ]
    lines = [
        "",
        "Recall by task, length and depth (k/n [Wilson 95%]):",
        "",
        markdown_table(rows, _TASK_COLUMNS),
    ]
    if "multi_depth" in needle.task_names():
        lines += ["", f"Note: {MULTI_DEPTH}."]
    return lines


_TASK_COLUMNS = ("task", "length", "depth", "found")


def curve_points(needle: NeedleFile) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """(task, length) -> [(depth, share found)] over the scored grid, depths in order."""
    lines: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for (task, length, depth), (k, n) in sorted(recall_cells(needle.trials).items()):
        if n:
            lines.setdefault((task, length), []).append((depth, k / n))
    return lines


def _curve(needle: NeedleFile, run_path: Path) -> list[str]:
    files = draw_depth_curve(curve_points(needle), run_path / CURVE_FILE, len(needle.task_names()) > 1)
    if not files:
        return []
    return ["", f"Recall by depth: ![recall by depth]({files[0].name}) ({files[1].name})"]


def draw_depth_curve(
    points: dict[tuple[str, int], list[tuple[float, float]]], stem: Path, name_tasks: bool
) -> list[Path]:
    """Draw `stem`.png and `stem`.svg: share found against depth, a panel per task (titled where the run
    asked several), a line per length in one colour per length across the panels."""
    if not points:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(task for task, _ in points))
    lengths = sorted({length for _, length in points})
    colours = {
        length: plt.get_cmap("viridis")(i / max(1, len(lengths) - 1) * 0.85)
        for i, length in enumerate(lengths)
    }
    columns = min(3, len(tasks))
    rows = -(-len(tasks) // columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(3.6 * columns + 1.4, 2.8 * rows + 0.9),
        squeeze=False,
        sharex=True,
        sharey=True,
    )
    for axis in axes.flat[len(tasks) :]:
        axis.set_visible(False)
    for axis, task in zip(axes.flat, tasks, strict=False):
        for (mine, length), line in points.items():
            if mine == task:
                axis.plot(
                    [d for d, _ in line],
                    [s for _, s in line],
                    marker="o",
                    color=colours[length],
                    label=f"{length} tokens",
                )
        axis.set_xlim(-0.04, 1.04)
        axis.set_ylim(-0.06, 1.06)
        axis.grid(alpha=0.3)
        if name_tasks:
            axis.set_title(task, fontsize=10)
    for axis in axes[-1, :]:
        axis.set_xlabel("depth of the fact")
    for axis in axes[:, 0]:
        axis.set_ylabel("share found")
    handles = [plt.Line2D([0], [0], color=colours[n], marker="o") for n in lengths]
    fig.legend(handles, [f"{n} tokens" for n in lengths], loc="upper right", fontsize=8)
    fig.suptitle("Retrieval by depth", x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    files = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for file in files:
        if file.suffix == ".svg":
            fig.savefig(file, metadata={"Date": None})  # no date: a rebuilt report is byte-identical
        else:
            fig.savefig(file)
    plt.close(fig)
    return files


def console_lines(run: RunDir) -> list[str]:
    lines: list[str] = []
    needle = NeedleFile.load(run.path)
    if needle is not None:
        control = needle.control
        lines.append(
            "needle recall: "
            + (
                f"control {control.length} tokens {needle.recall_text(control.length, control, True)}; "
                if control
                else ""
            )
            + ", ".join(f"{n} tokens {needle.recall_text(n, r)}" for n, r in needle.recall_sorted())
        )
    return lines
