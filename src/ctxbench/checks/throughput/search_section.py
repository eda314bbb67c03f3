"""The run report's SLO search: each probed level in the order the search chose it, what it measured and
which limit it broke, then the answer and the repeats of the level found."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...measure.slo_search import PERCENTILE_LIMITS, above_text, limit_name, probe_text, slo_text
from ...render.tables import bounded_text, fmt, markdown_table


def _figures(data: Mapping[str, Any], by: str, level: float, run: int) -> Mapping[str, Any] | None:
    if run:
        unit = f"throughput-{'u' if by == 'users' else 'r'}{level:g}-rep{run}"
        return data.get("repeats", {}).get(unit)
    if by == "users":
        return data.get("levels", {}).get(str(int(level)))
    return data.get("rates", {}).get(f"{level:g}")


def _requests(level: Mapping[str, Any]) -> str:
    """The measured requests that decided a probe, and in how many rounds (`_Levels`)."""
    if "requests" not in level:
        return "n/a"
    return f"{level['requests']:,}" + (f" ({level['rounds']})" if level.get("rounds", 1) > 1 else "")


def _percentile(level: Mapping[str, Any], figure: str, name: str) -> str:
    figures = level.get(figure, {})
    return bounded_text(figures.get(name), figures.get(f"{name}_ci"), 4 if figure == "tpot_s" else 3)


def search_lines(data: Mapping[str, Any]) -> list[str]:
    found = data.get("search")
    if not found:
        return []
    head = ["", "### The highest level within the SLO", ""]
    if "skipped" in found:
        return [*head, f"Not searched: {found['skipped']}."]
    by = found["by"]
    unit = "users" if by == "users" else "req/s"
    rows = []
    # the percentiles the SLO judges (TTFT and TPOT p99 where it names none)
    shown: list[tuple[str, str, str]] = [
        (key, figure, name)
        for key, (figure, name, _) in PERCENTILE_LIMITS.items()
        if found["slo"].get(key) is not None
    ] or [("ttft_p99_s", "ttft_s", "p99"), ("tpot_p99_s", "tpot_s", "p99")]
    probes = [(p, 0) for p in found["probes"]] + [
        ({"level": found["met"], **r}, r["run"]) for r in found.get("repeats", [])
    ]
    for number, (probe, run) in enumerate(probes, start=1):
        level = _figures(data, by, probe["level"], run) or {}
        share = level["goodput_requests"] / level["requests"] if level.get("requests") else None
        rows.append(
            [
                str(number),
                f"{probe['level']:g}" + (f" (repeat {run})" if run else ""),
                probe_text(probe),
                _requests(level),
                *(_percentile(level, figure, name) for _, figure, name in shown),
                fmt(share),
                fmt(level.get("output_tokens_per_s"), 1),
            ]
        )
    met = found["met"]
    _, said = above_text(found, f" {unit}")
    runs = f", met in {found['met_runs']} of {found['runs']} runs" if found["runs"] > 1 else ""
    answer = (
        f"no level probed met it (the lowest, {said})" if met is None else f"**{met:g} {unit}**{runs}; {said}"
    )
    return [
        *head,
        f"SLO: {slo_text(found['slo'])}. The search doubles {unit} from {found['start']:g} until a level "
        "breaks the SLO, then bisects between the highest level met and the lowest not met, each probe a "
        "level measured like those above, run until its requests decide it or its cap "
        f'(docs/metrics.md, "SLO search"); it stopped because '
        f"{found['stopped']}. Highest level within the SLO: {answer}.",
        "",
        markdown_table(
            rows,
            [
                "probe",
                unit,
                "SLO",
                "requests (rounds)",
                *(f"{limit_name(key)} s [95%]" for key, _, _ in shown),
                "goodput share",
                "output tok/s",
            ],
        ),
    ]
