"""The agent sessions' request labels: the level (`sessions` at once), the session, the turn, the cached
tokens it meant to reuse, a replayed trace's turn (`trace`), and the idle gap before it (seconds)."""

from __future__ import annotations

from pydantic import field_serializer

from ...labels import Labels


class SessionsLabels(Labels):
    check: str = "sessions"
    sessions: int | None = None
    session: int | None = None
    turn: int | None = None
    intended_cached_tokens: int | None = None
    trace: bool = False
    gap_s: float | None = None

    @field_serializer("gap_s")
    def _gap(self, gap: float | None) -> str | None:
        return None if gap is None else f"{gap:.3f}"
