"""The run report's capacity section (the limit, the prompt near it, the one over it) and its console line."""

from __future__ import annotations

from ...render.run_read import RunRead
from ...render.tables import fmt, relative
from ...store.run_dir import RunDir
from .file import CapacityFile


def capacity_section(read: RunRead) -> list[str]:
    run = read.run
    c = CapacityFile.load(run.path)
    if c is None:
        return []
    verdict = "holds" if c.holds else "does NOT hold"
    return [
        "",
        f"## Claim 1, capacity: {verdict}",
        "",
        f"- Limit {c.limit_tokens} tokens per request, read from {c.limit_source}.",
        f"- Near the limit: {c.target_tokens} planned tokens, "
        + (
            f"accepted; server counted {c.prompt_tokens} (count error {c.count_error_tokens:+d}); "
            f"prefill {fmt(c.prefill_s)} s, {fmt(c.prefill_tokens_per_s, 0)} tokens/s."
            if c.accepted
            else f"NOT accepted: {c.near_limit_error}"
        ),
        f"- Over the limit ({c.over_limit_tokens} tokens): {c.over_limit_outcome}",
        f"- Source: `{relative(CapacityFile.path_in(run.path))}`; requests {', '.join(c.request_ids)} in "
        "`requests.jsonl`.",
    ]


def console_lines(run: RunDir) -> list[str]:
    capacity = CapacityFile.load(run.path)
    if capacity is None or run.died_during() == "capacity":  # a death is said once, as the run's
        return []
    if capacity.miscounted:
        return [f"capacity: not concluded: a counting mismatch ({capacity.miscounted})"]
    return [
        f"capacity: {'holds' if capacity.holds else 'does NOT hold'} at {capacity.target_tokens} of "
        f"{capacity.limit_tokens} tokens; over the limit: {capacity.over_limit_outcome[:80]}"
    ]
