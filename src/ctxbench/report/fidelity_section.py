"""The run report's cache-fidelity section: per length, each path's answer against its cold one."""

from __future__ import annotations

from ..check_files import FidelityFile
from .run_read import RunRead
from .tables import fmt, markdown_table, relative


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
    lines.append(
        f"\nSource: `{relative(FidelityFile.path_in(run.path))}` and `{relative(run.requests_path)}` "
        "(`labels.check = fidelity`, `logprobs`)."
    )
    return lines
