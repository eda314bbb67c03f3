"""`sessions.json`, the agent-sessions check's summary (check.py): every turn, and per level of
concurrent sessions the share of returning turns' context found cached, the re-prefill the gaps cost, and
whether the level held. Figures are frozen when measured (docs/results-format.md, "Derived figures")."""

from __future__ import annotations

from typing import Any, ClassVar

from ...measure.stats import percentile
from ...store.check_files import CheckFile, _Open
from .params import SessionsParams

HELD_SHARE = 0.9  # a returning turn that found this share of its previous context cached was kept


class SessionTurn(_Open):
    """One turn of one session. `reusable_tokens`: the previous turn's prompt and reply as the server counted
    them, everything the turn could find cached (None on a session's first turn)."""

    sessions: int  # the level: sessions at once
    session: int
    turn: int
    request_id: str
    ok: bool
    gap_s: float | None  # idle seconds since the previous reply ended (None: the first turn)
    prompt_tokens: int | None
    reusable_tokens: int | None
    cached_tokens: int | None  # None: the server reported none
    reprefill_tokens: int | None  # prompt tokens computed again: prompt - cached
    ttft_s: float | None

    @property
    def hit(self) -> float | None:
        """Cached over reusable (at most 1), for a returning turn whose cached tokens were reported."""
        if not self.ok or self.reusable_tokens is None or self.cached_tokens is None:
            return None
        return (
            min(self.cached_tokens, self.reusable_tokens) / self.reusable_tokens
            if self.reusable_tokens
            else None
        )


class SessionsLevel(_Open):
    """One level: `sessions` at once. `hit_ratio`: the returning turns' cached tokens over their reusable
    ones, summed (None where the server reported no cached tokens); `holds`: at least the threshold."""

    sessions: int
    attempt: int
    unit: str | None = None  # sessions-s<N>, or sessions-trace for a replayed trace
    turns: int
    failed: int
    returning: int  # returning turns that succeeded
    held_turns: int | None  # of them, those that found at least HELD_SHARE of their context cached
    hit_ratio: float | None
    reprefill_tokens: int | None  # prompt tokens the returning turns computed again, all together
    ttft_first_s: float | None  # median over first turns
    ttft_return_s: float | None  # median over returning turns
    longest_context: int | None
    mean_gap_s: float | None
    holds: bool | None  # None: not reported


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return percentile(present, 50) if present else None


def level_summary(
    sessions: int, turns: list[SessionTurn], params: SessionsParams, attempt: int, unit: str | None = None
) -> SessionsLevel:
    back = [t for t in turns if t.turn > 1 and t.ok]
    hits = [t for t in back if t.hit is not None]
    reported = bool(back) and len(hits) == len(back)
    reusable = sum(t.reusable_tokens or 0 for t in hits)
    ratio = (
        sum(min(t.cached_tokens or 0, t.reusable_tokens or 0) for t in hits) / reusable if reusable else None
    )
    ratio = ratio if reported else None
    gaps = [t.gap_s for t in back if t.gap_s is not None]
    return SessionsLevel(
        sessions=sessions,
        attempt=attempt,
        unit=unit,
        turns=len(turns),
        failed=sum(not t.ok for t in turns),
        returning=len(back),
        held_turns=sum((t.hit or 0) >= HELD_SHARE for t in hits) if reported else None,
        hit_ratio=ratio,
        reprefill_tokens=sum(t.reprefill_tokens or 0 for t in back) if reported else None,
        ttft_first_s=_median([t.ttft_s for t in turns if t.turn == 1 and t.ok]),
        ttft_return_s=_median([t.ttft_s for t in back]),
        longest_context=max((t.prompt_tokens for t in turns if t.prompt_tokens is not None), default=None),
        mean_gap_s=sum(gaps) / len(gaps) if gaps else None,
        holds=None if ratio is None else ratio >= params.hit_threshold,
    )


class SessionsFile(CheckFile):
    """Agent sessions: every level run (upward), every turn, the largest level that held and the cliff."""

    FILE: ClassVar[str] = "sessions.json"
    spec: dict[str, Any]
    levels: list[SessionsLevel]
    turns: list[SessionTurn]
    held: int | None  # the most sessions at once whose returning turns held (None: none did, or not reported)
    cliff: int | None  # the first level that did not hold (None: every level run held, or not reported)

    @classmethod
    def of(
        cls, params: SessionsParams, levels: list[SessionsLevel], turns: list[SessionTurn]
    ) -> SessionsFile:
        ordered = sorted(levels, key=lambda level: level.sessions)
        cliff = next((level.sessions for level in ordered if level.holds is False), None)
        held = [
            level.sessions for level in ordered if level.holds and (cliff is None or level.sessions < cliff)
        ]
        return cls(
            spec=params.model_dump(mode="json"),
            levels=ordered,
            turns=sorted(turns, key=lambda t: (t.sessions, t.session, t.turn)),
            held=max(held, default=None),
            cliff=cliff,
        )

    def hit_by_gap(self, edges: tuple[float, ...] = (1, 5, 30, 60, 300)) -> list[tuple[str, int, float]]:
        """Returning turns grouped by their gap (under 1 s, 1-5 s, ...): (group, turns, hit ratio), for the
        groups that have turns whose cached tokens were reported."""
        bounds = [0.0, *edges, float("inf")]
        out = []
        for low, high in zip(bounds, bounds[1:], strict=False):
            group = [
                t for t in self.turns if t.hit is not None and t.gap_s is not None and low <= t.gap_s < high
            ]
            if group:
                reusable = sum(t.reusable_tokens or 0 for t in group)
                cached = sum(min(t.cached_tokens or 0, t.reusable_tokens or 0) for t in group)
                name = f"{low:g}-{high:g} s" if high != float("inf") else f"{low:g} s and over"
                out.append((name, len(group), cached / reusable if reusable else 0.0))
        return out
