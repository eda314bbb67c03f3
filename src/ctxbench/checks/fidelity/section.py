"""The run report's cache-fidelity section (per length, each path's answer against its cold one, the drift per
position drawn) and its console line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...records import RequestRecord
from ...render.run_read import RunRead
from ...render.tables import fmt, markdown_table, relative
from ...store.run_dir import RunDir
from .file import FidelityFile


def fidelity_section(read: RunRead) -> list[str]:
    run = read.run
    data = FidelityFile.load(run.path)
    if data is None:
        return []
    spec = data.spec
    lines = [
        "",
        "## Cache fidelity",
        "",
        f"At each length one fresh document, greedy, {spec['max_tokens']} tokens with their top-"
        f"{spec['top_logprobs']} log-probabilities: computed cold twice (the engine's own noise), then "
        "served warm, partly cached (another question over the same document), restored after other "
        "prompts took the slots and cold among other requests, each compared token by token with its "
        "cold answer. Tolerance: "
        f"{spec['drift_tolerance']:g} in a chosen token's log-probability (docs/metrics.md).",
    ]
    for failure in data.failures():
        lines.append(f"- **The cache changed the answer**: {failure}.")
    for noise in data.cold_noise():
        lines.append(f"- Not deterministic cold at {noise}: the other comparisons are not a verdict.")
    columns = ["length", "path", "cached tok", "compared", "first divergence", "identical", "logprob drift"]
    columns += ["max top-k L1", "top-k overlap", "verdict"]
    rows = []
    diverged = []
    for length in data.lengths:
        for p in length.paths:
            rows.append(
                [
                    str(length.length),
                    p.path,
                    "not reported" if p.cached_tokens is None else str(p.cached_tokens),
                    str(p.compared),
                    "none" if p.first_divergence is None else str(p.first_divergence),
                    fmt(p.identical_fraction),
                    "n/a" if p.max_logprob_diff is None else f"{p.max_logprob_diff:.2g}",
                    "n/a" if p.max_top_l1 is None else f"{p.max_top_l1:.2g}",
                    fmt(p.top_overlap),
                    p.text,
                ]
            )
            if p.first_divergence is not None:
                diverged.append(
                    f"- {p.path} at {length.length}: cold `{p.reference_text}` / `{p.answer_text}`"
                )
        margin = length.smallest_margin
        if margin is not None:
            lines.append(
                f"- {length.length} tokens: the cold answer's closest call (top-1 minus top-2) {margin:.2g}."
            )
    lines += ["", markdown_table(rows, columns), *diverged]
    figure = draw_drift(drift_by_position(data, read.records), run.path / "fidelity-drift")
    if figure is not None:
        lines += [
            "",
            "The drift per position: |log-probability of the token chosen, path - cold| at each position up "
            f"to the first divergence, a panel per length (a path that diverged at its first token has no "
            f"line): ![drift per position]({figure.name}) ({figure.stem}.svg).",
        ]
    lines.append(
        f"\nSource: `{relative(FidelityFile.path_in(run.path))}` and `{relative(run.requests_path)}` "
        "(`labels.check = fidelity`, `logprobs`)."
    )
    return lines


def console_lines(run: RunDir) -> list[str]:
    data = FidelityFile.load(run.path)
    return [] if data is None else [f"cache fidelity: {data.summary()}"]


Drifts = dict[int, dict[str, list[float]]]


def drift_by_position(data: FidelityFile, records: Sequence[RequestRecord]) -> Drifts:
    """length -> path -> |chosen token's log-probability, path - cold| at each position, from the records'
    own log-probabilities, up to the first divergence (after it the tokens differ: nothing to compare)."""
    by_id = {r.request_id: r for r in records}
    out: Drifts = {}
    for length in data.lengths:
        for p in length.paths:
            mine, cold = by_id.get(p.request_id), by_id.get(p.reference_id)
            if mine is None or cold is None or not mine.logprobs or not cold.logprobs:
                continue
            drifts = []
            for a, b in zip(cold.logprobs, mine.logprobs, strict=False):
                if (a.id, a.token) != (b.id, b.token):
                    break
                drifts.append(abs(a.logprob - b.logprob))
            if drifts:
                out.setdefault(length.length, {})[p.path] = drifts
    return out


def draw_drift(drifts: Drifts, stem: Path) -> Path | None:
    """Draw `stem`.png and `stem`.svg, a panel per length, a line per path; the PNG, or None with nothing to
    draw. A path with no drift at all draws on zero (a log axis would hide it)."""
    if not drifts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(drifts), figsize=(4.5 * len(drifts), 3.2), squeeze=False)
    for axis, (length, paths) in zip(axes[0], sorted(drifts.items()), strict=True):
        for path, values in paths.items():
            axis.plot(range(len(values)), values, marker=".", label="cold again" if path == "cold" else path)
        axis.set_title(f"{length} tokens", fontsize=9)
        axis.set_xlabel("position in the answer")
        axis.set_ylabel("|logprob - cold|")
        axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"))
    fig.savefig(stem.with_suffix(".svg"), metadata={"Date": None})  # no date: a rebuilt report is identical
    plt.close(fig)
    return stem.with_suffix(".png")
