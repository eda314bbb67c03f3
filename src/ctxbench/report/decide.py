"""The decision guide: readings of the evidence for particular decisions, each with its conditions.

Generated from the evidence rows alone, in the seed's style ("which result we would use for which
decision"). Never an overall best: each reading answers one question, says under which conditions it
holds, and carries the caveats of the rows it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..results.cell import MISSING, Cell
from ..results.evidence import Row


@dataclass(frozen=True)
class Reading:
    question: str
    answer: str
    conditions: str


def _complete(cell: Cell) -> bool:
    """A recall count k/n with n > 0 and every one found."""
    return cell.scored is not None and cell.scored[1] > 0 and cell.scored[0] == cell.scored[1]


def _caveat(row: Row) -> str:
    return f"{row.status}" + (f": {'; '.join(row.reasons)}" if row.reasons else "")


def readings(rows: Sequence[Row]) -> list[Reading]:
    """One reading per decision the evidence can inform; says so when it cannot."""
    out: list[Reading] = []
    complete = [
        r
        for r in rows
        if r.status != "failed"
        and _complete(r.recall_alone)
        and (r.recall_shared == MISSING or _complete(r.recall_shared))
    ]
    timed = [r for r in complete if r.ttft_alone.value is not None]
    if timed:
        best = min(timed, key=lambda r: r.ttft_alone.value or 0.0)
        out.append(
            Reading(
                "Fastest growing conversation with complete recall",
                f"{best.deployment}: last turn {best.ttft_alone.text} to the first token, decode "
                f"{best.decode_alone.text}",
                f"at the context its ramp reached, on this node; recall {best.recall_alone.text} alone, "
                f"{best.recall_shared.text} with 2 users; {_caveat(best)}",
            )
        )
    else:
        out.append(
            Reading(
                "Fastest growing conversation with complete recall",
                "no deployment recalled the planted fact on every turn of its ramp",
                "complete recall alone and with 2 users is required before speed is compared",
            )
        )
    priced = [r for r in rows if r.cost.value is not None and r.status != "failed"]
    if priced:
        cheapest = min(priced, key=lambda r: r.cost.value or 0.0)
        out.append(
            Reading(
                "Cheapest per token in a 2-user conversation",
                f"{cheapest.deployment}: {cheapest.cost.text}",
                "tokens the server processed (new prompt + output) over the 2-user ramp; "
                f"{_caveat(cheapest)}",
            )
        )
    else:
        out.append(
            Reading(
                "Cheapest per token",
                "not computed",
                "no run states its GPU count (CPU runs have no GPU cost)",
            )
        )
    shared = [r for r in rows if r.stall.value is not None]
    if shared:
        calm = min(shared, key=lambda r: r.stall.value or 0.0)
        out.append(
            Reading(
                "Decode that holds up while another user prefills",
                f"{calm.deployment}: {calm.stall.text}",
                f"pooled over its 2-user ramp; smaller is better; {_caveat(calm)}",
            )
        )
    everywhere = [r for r in complete if _complete(r.retrieval)]
    out.append(
        Reading(
            "Complete recall on every sampled check",
            ", ".join(r.deployment for r in everywhere) or "none",
            "one-shot retrieval n/n and conversation recall n/n alone and with 2 users, at the sampled "
            "lengths and depths only; not a broad reasoning evaluation",
        )
    )
    served = [r for r in rows if r.throughput.value is not None and r.status != "failed"]
    costed = [r for r in served if r.throughput_cost.value is not None]
    if costed:
        cheapest = min(costed, key=lambda r: r.throughput_cost.value or 0.0)
        out.append(
            Reading(
                "Many users, short prompts: cheapest per output token",
                f"{cheapest.deployment}: {cheapest.throughput_cost.text} ({cheapest.throughput.text})",
                f"closed-loop users at the level with the most output tokens/s, this prompt and output "
                f"length, this campaign's price and GPU count; {_caveat(cheapest)}",
            )
        )
    elif served:
        fastest = max(served, key=lambda r: r.throughput.value or 0.0)
        out.append(
            Reading(
                "Many users, short prompts: most output tokens/s",
                f"{fastest.deployment}: {fastest.throughput.text}",
                f"no GPU count, so no cost (a CPU run); {_caveat(fastest)}",
            )
        )
    else:
        out.append(
            Reading(
                "Many users, short prompts", "not measured", "add `[checks.throughput]` to the campaign file"
            )
        )
    out += _traffic_readings(rows)
    return out


def _traffic_readings(rows: Sequence[Row]) -> list[Reading]:
    """Readings of the open loop, the returning users and the replayed trace, where they ran."""
    out = []
    rated = [r for r in rows if r.open_loop.value is not None and r.status != "failed"]
    if rated:
        best = max(rated, key=lambda r: r.open_loop.value or 0.0)
        out.append(
            Reading(
                "Most requests a second kept up with (open loop)",
                f"{best.deployment}: {best.open_loop.text}",
                "the highest offered rate whose requests' lag did not grow, at these prompt and output "
                "lengths; compare deployments swept over the same rates (`rates_of_capacity` scales them "
                f"to each run's own capacity, so those differ); {_caveat(best)}",
            )
        )
    searched = [r for r in rows if r.slo.source and r.status != "failed"]
    if searched:
        out.append(
            Reading(
                "The highest load within an SLO",
                "; ".join(f"{r.deployment}: {r.slo.text}" for r in searched),
                "each run's own search, SLO and prompt and output lengths (the cell says which), not ranked: "
                "levels meet an SLO by the figures of one run of them, and with search_repeats the cell "
                "says in how many runs the level found met it",
            )
        )
    returned = [r for r in rows if r.returning.value is not None and r.status != "failed"]
    if returned:
        kept = max(returned, key=lambda r: r.returning.value or 0.0)
        out.append(
            Reading(
                "Keeps a returning conversation's context after other users' traffic",
                f"{kept.deployment}: {kept.returning.text}",
                "at the conversations, context and filler traffic of its `[checks.returning]`; more traffic "
                f"or longer contexts push more out; {_caveat(kept)}",
            )
        )
    traced = [r for r in rows if r.trace.value is not None and r.status != "failed"]
    if traced:
        hits = max(traced, key=lambda r: r.trace.value or 0.0)
        out.append(
            Reading(
                "Serves the most of a replayed trace's shared prefixes from its cache",
                f"{hits.deployment}: {hits.trace.text}",
                "on this trace at its time scale; an engine that reports no cached tokens reads n/a; "
                f"{_caveat(hits)}",
            )
        )
    return out
