"""ctxbench's records against the engine's own counters, per check: the same requests, prompt, generation
and cached tokens, and TTFT a little above the engine's (docs/metrics.md, "Agreement with the engine's own
counters"). A figure that disagrees with the engine is a bug until explained; this is where it shows.

The engine side is the check's `/metrics` delta (after - before, from the raw samples in `metrics.jsonl`,
so runs recorded before a name was mapped get it too); the ctxbench side sums the check's records of the
same attempt. A name the engine does not export is left out; a sum the records cannot give (cached tokens
the server did not report) is None, "not reported". An engine that prints its counters rounded (llama.cpp: 6
significant digits, so every count above 10^6 is rounded) agrees when the difference is within that rounding,
and says so; where its per-request `timings` give the same count exactly, that exact sum must match too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..checks.catalog import CHECK_NAMES
from ..checks.probe import PROBE
from ..measure import metrics
from ..records import RequestRecord
from ..render.tables import markdown_table
from ..store.counters import engine_counters, reported_text
from ..store.run_dir import RunDir, attempt_of

NAMES = (
    "requests",
    "prompt_tokens_all",
    "prompt_tokens_computed",
    "generation_tokens",
    "cached_tokens",
    "ttft_count",
    "ttft_sum_s",
)


@dataclass(frozen=True)
class Agreement:
    """One counter over one check: the engine's delta and ctxbench's sum over the same requests."""

    check: str
    name: str
    engine: float
    ctxbench: float | None  # None: the records cannot say (not reported)
    rounding: float = 0.0  # how far `engine` may be from the true count: the engine printed it rounded
    exact: float | None = None  # the same count summed from the engine's per-request timings, where given

    @property
    def agrees(self) -> bool | None:
        """Counts equal exactly, or within the engine's printed rounding (and then equal to the engine's exact
        per-request sum where it has one); TTFT's sum is never below the engine's (ctxbench's clock starts
        earlier)."""
        if self.ctxbench is None:
            return None
        if self.name == "ttft_sum_s":
            return self.ctxbench >= self.engine - self.rounding
        if self.exact is not None and round(self.exact) != round(self.ctxbench):
            return False
        return abs(round(self.ctxbench) - self.engine) <= max(self.rounding, 0.5)

    @property
    def within_rounding(self) -> bool:
        """Agrees only because the engine printed its counter rounded (the figures shown differ)."""
        return (
            bool(self.agrees)
            and self.name != "ttft_sum_s"
            and round(self.ctxbench or 0) != round(self.engine)
        )


def check_of(record: RequestRecord) -> str:
    """The check a record belongs to (probe records carry no `check` label before 0.1.0's issue 32)."""
    return record.check or (PROBE.name if record.phase else "")


def records_sums(records: Sequence[RequestRecord]) -> dict[str, float | None]:
    """What the engine's counters should read over these records (docs/metrics.md)."""
    served = [r for r in records if r.http_status == 200]
    usage = [r.usage for r in served if r.usage is not None]
    reported = [u.cached_tokens for u in usage if u.cached_tokens is not None]
    prompts = [u.prompt_tokens or 0 for u in usage]
    first = [metrics.first_token_ns(r) for r in served]
    ttfts = [(f - r.sent_ns) / metrics.NS for r, f in zip(served, first, strict=True) if f is not None]
    return {
        "requests": len(served),
        "prompt_tokens_all": sum(prompts),
        "prompt_tokens_computed": sum(prompts) - sum(reported) if len(reported) == len(usage) else None,
        "generation_tokens": sum(u.completion_tokens or 0 for u in usage),
        "cached_tokens": sum(reported) if len(reported) == len(usage) else None,
        "ttft_count": len(ttfts),
        "ttft_sum_s": sum(ttfts),
    }


# The engine's exact per-request counts (llama.cpp's `timings`) adding up to a counter: name -> timings keys.
TIMINGS_SUMS = {
    "prompt_tokens_computed": ("prompt_n",),
    "cached_tokens": ("cache_n",),
    "generation_tokens": ("predicted_n",),
    "prompt_tokens_all": ("prompt_n", "cache_n"),
}


def timings_sums(records: Sequence[RequestRecord]) -> dict[str, float]:
    """The counters the engine's own per-request timings sum to, exactly, where every served record has
    them."""
    served = [r.server_timings or {} for r in records if r.http_status == 200]
    return {
        name: sum(t[key] for t in served for key in keys)
        for name, keys in TIMINGS_SUMS.items()
        if served and all(isinstance(t.get(key), int) for t in served for key in keys)
    }


def engine_agreement(run: RunDir, records: Sequence[RequestRecord] | None = None) -> list[Agreement]:
    """Every counter the engine exports, per check, beside ctxbench's sum over the same requests."""
    records = list(run.records()) if records is None else records
    out = []
    for check, counters in engine_counters(run).items():
        if check not in CHECK_NAMES:
            continue
        mine = [r for r in records if check_of(r) == check and attempt_of(r.request_id) == counters.attempt]
        sums, exact = records_sums(mine), timings_sums(mine)
        out += [
            Agreement(
                check, name, counters.deltas[name], sums[name], counters.uncertainty[name], exact.get(name)
            )
            for name in NAMES
            if name in counters.deltas
        ]
    return out


def agreement_section(run: RunDir, records: Sequence[RequestRecord]) -> list[str]:
    found = engine_agreement(run, records)
    if not found:
        return []
    checks = list(dict.fromkeys(a.check for a in found))
    names = [n for n in NAMES if any(a.name == n for a in found)]
    table = {(a.check, a.name): a for a in found}

    def cell(check: str, name: str) -> str:
        a = table.get((check, name))
        if a is None:
            return "-"
        digits = 3 if name == "ttft_sum_s" else 0
        mine = reported_text(a.ctxbench, digits)
        mark = {True: "", False: " **differs**", None: ""}[a.agrees]
        if a.within_rounding:
            mark = " (agrees: the engine rounds)"
        return f"{a.engine:.{digits}f} / {mine}{mark}"

    differs = [a for a in found if a.agrees is False]
    rounded = [a for a in found if a.within_rounding]
    return [
        "",
        "## The engine's counters against ctxbench's records (engine / ctxbench)",
        "",
        markdown_table([[check, *(cell(check, n) for n in names)] for check in checks], ["check", *names]),
        "",
        (
            f"{len(differs)} figure(s) differ: see docs/metrics.md before trusting them."
            if differs
            else "Every count agrees"
            + (
                "; ctxbench's TTFT sum is at or above the engine's (its clock starts at the send, the "
                "engine's after parsing and tokenizing)."
                if "ttft_sum_s" in names
                else "."
            )
        )
        + (
            f" {len(rounded)} figure(s) agree within the engine's rounding: it prints /metrics values to "
            "6 significant digits (1.0505e+06), so counts above 10^6 are rounded; its per-request timings, "
            "where it gives them, sum to ctxbench's figure exactly (docs/metrics.md)."
            if rounded
            else ""
        ),
    ]
