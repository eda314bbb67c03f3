"""The decode stall: a user's decode rate outside and inside the windows where other users' prefills
ran (docs/metrics.md, "The decode stall"), per turn, per user and pooled over a ramp. A prefill window is the
engine's own where the record carries the engine's prompt time, else the client's send -> first token."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from ..records import RequestRecord
from .metrics import NS, engine_prompt_s, first_token_ns, implausible, output_tokens

# Where the prefill windows came from: the engine's prompt time for every window that overlapped the decode,
# the client's send -> first token for every one (an upper bound), or some of each.
WindowSource = Literal["engine", "client", "mixed"]


@dataclass(frozen=True)
class Stall:
    """A decoding request's rate inside other requests' prefill windows against outside them.

    `tokens_*` count decoded tokens whose chunk arrived in (or out of) the windows; `time_*_s` is how
    long the request's decode interval spent in (or out of) them; `window` says whose clock drew the windows
    that overlapped it (`prefill_window`).
    """

    request_id: str
    tokens_inside: float
    time_inside_s: float
    tokens_outside: float
    time_outside_s: float
    window: WindowSource = "client"

    @property
    def rate_inside(self) -> float | None:
        return self.tokens_inside / self.time_inside_s if self.time_inside_s > 0 else None

    @property
    def rate_outside(self) -> float | None:
        return self.tokens_outside / self.time_outside_s if self.time_outside_s > 0 else None

    @property
    def factor(self) -> float | None:
        """Slowdown = rate outside / rate inside; infinite when nothing was decoded inside."""
        inside, outside = self.rate_inside, self.rate_outside
        if inside is None or outside is None:
            return None
        return math.inf if inside == 0 else outside / inside

    @property
    def slowed(self) -> bool:
        """Decode was slower inside the windows than outside: a factor above 1. A factor at or below 1 is
        no stall (the windows held no prefill that competed with this decode), never shown as one."""
        factor = self.factor
        return factor is not None and factor > 1


@dataclass(frozen=True)
class Window:
    start_ns: int
    end_ns: int
    source: Literal["engine", "client"]


def prefill_window(record: RequestRecord) -> Window:
    """A request's prefill window. Where the record carries the engine's own prompt time (llama.cpp's
    `timings.prompt_ms`): [first token - that time, first token], the time the engine spent on the prompt.
    Otherwise send -> first token (-> end of the request if no token came), the client's upper bound: it also
    holds uploading and tokenizing the body and queueing, when the engine was still serving others alone."""
    first = first_token_ns(record)
    prompt_s = engine_prompt_s(record)
    if first is not None and prompt_s is not None:
        return Window(max(record.sent_ns, first - round(prompt_s * NS)), first, "engine")
    return Window(record.sent_ns, first if first is not None else record.end_ns, "client")


def _merge(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(w for w in windows if w[1] > w[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _overlap_ns(a: int, b: int, windows: Sequence[tuple[int, int]]) -> int:
    return sum(max(0, min(b, end) - max(a, start)) for start, end in windows)


MIN_OVERLAP_STEPS = 5


def stall(
    record: RequestRecord, others: Sequence[RequestRecord], min_overlap_s: float | None = None
) -> Stall | None:
    """Decode rate of `record` inside the prefill windows of `others` (other users' requests) against
    outside them. Windows are each other request's `prefill_window`, merged, and clipped to the
    decode interval (first -> last token of `record`); a window whose overlap is shorter than
    `min_overlap_s` (default: 5 of the record's median inter-chunk gaps) is too short to say anything
    about a rate and counts as outside. Each decode step is the gap between two consecutive chunks
    and carries that chunk's tokens (`usage` / chunks); a gap that straddles a window edge splits
    its tokens in proportion to the time on each side. Rate inside = tokens inside / time inside;
    likewise outside. Returns None when `record` did not decode (fewer than 2 chunks) or its timing cannot
    be true (`metrics.implausible`).
    """
    if len(record.chunks) < 2 or implausible(record) is not None:
        return None
    start, end = record.chunks[0].arrived_ns, record.chunks[-1].arrived_ns
    gaps = sorted(b.arrived_ns - a.arrived_ns for a, b in pairwise(record.chunks))
    shortest_ns = (
        (min_overlap_s * NS) if min_overlap_s is not None else MIN_OVERLAP_STEPS * gaps[len(gaps) // 2]
    )
    own = [prefill_window(o) for o in others]
    clipped = [(max(a, start), min(b, end)) for a, b in _merge([(w.start_ns, w.end_ns) for w in own])]
    windows = [(a, b) for a, b in clipped if b - a > 0 and b - a >= shortest_ns]
    used = {w.source for w in own if any(_overlap_ns(w.start_ns, w.end_ns, [c]) for c in windows)}
    used = used or {w.source for w in own}
    tokens = output_tokens(record)
    per_chunk = (
        (tokens.tokens - 1) / (len(record.chunks) - 1) if tokens is not None and tokens.tokens > 1 else 1.0
    )
    tokens_inside = 0.0
    for before, after in pairwise(record.chunks):
        gap = after.arrived_ns - before.arrived_ns
        if gap > 0:
            tokens_inside += per_chunk * _overlap_ns(before.arrived_ns, after.arrived_ns, windows) / gap
    inside_ns = _overlap_ns(start, end, windows)
    total_tokens = per_chunk * (len(record.chunks) - 1)
    return Stall(
        request_id=record.request_id,
        tokens_inside=tokens_inside,
        time_inside_s=inside_ns / NS,
        tokens_outside=total_tokens - tokens_inside,
        time_outside_s=(end - start - inside_ns) / NS,
        window=_source(used),
    )


def _source(sources: set[WindowSource] | set[Literal["engine", "client"]]) -> WindowSource:
    if sources == {"engine"}:
        return "engine"
    return "mixed" if "engine" in sources else "client"


def pooled_stall(stalls: Iterable[Stall | None]) -> Stall | None:
    """All stalls of a run pooled: total tokens over total time, inside and outside the windows."""
    present = [s for s in stalls if s is not None]
    if not present:
        return None
    return Stall(
        request_id="all",
        tokens_inside=sum(s.tokens_inside for s in present),
        time_inside_s=sum(s.time_inside_s for s in present),
        tokens_outside=sum(s.tokens_outside for s in present),
        time_outside_s=sum(s.time_outside_s for s in present),
        window=_source(
            {s.window for s in present if s.rate_inside is not None} or {s.window for s in present}
        ),
    )


WINDOW_WORDS: dict[WindowSource, str] = {
    "engine": "engine's prefill time",
    "client": "send -> first token, an upper bound",
    "mixed": "engine's prefill time where reported, else send -> first token",
}


def format_stall(figure: Stall | None) -> str:
    """`589 -> 18 tokens/s (32x; engine's prefill time)`, or why there is no figure (docs/metrics.md)."""
    if figure is None or figure.rate_outside is None:
        return "no decode to measure"
    if figure.rate_inside is None:
        return f"{figure.rate_outside:.0f} tokens/s, no overlap with another user's prefill"
    rates = f"{_rate(figure.rate_outside)} -> {_rate(figure.rate_inside)} tokens/s"
    if not figure.slowed:
        return f"{rates} (not slower: no prefill competed with the decode)"
    factor = figure.factor
    shown = "stalled" if factor == math.inf else f"{factor:.1f}x"
    return f"{rates} ({shown}; {WINDOW_WORDS[figure.window]})"


def format_factor(factor: str, window: str) -> str:
    """A ramp1m.csv row's stall cell for the per-turn table: `32.0x`, `not slower` (a factor at or below 1
    is no stall) or `-` (no overlap); an engine window is the default, any other is marked: `(client)`,
    `(mixed)` (a row from before the column, "", was drawn with the client's window)."""
    if not factor:
        return "-"
    value = float(factor)
    if value <= 1:
        return "not slower"
    shown = "stalled" if math.isinf(value) else f"{value:.1f}x"
    return shown if window == "engine" else f"{shown} ({window or 'client'})"


def _rate(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def user_stalls(
    records: Sequence[RequestRecord], user_of: Callable[[RequestRecord], object]
) -> dict[str, Stall | None]:
    """For records of several users sharing one server at one time, each record's stall against the
    prefill windows of every other user's records (`user_of` tells users apart: its check's user label)."""
    users = {r.request_id: user_of(r) for r in records}
    return {
        r.request_id: stall(r, [o for o in records if users[o.request_id] != users[r.request_id]])
        for r in records
    }
