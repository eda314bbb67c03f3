"""The ramp's request labels: the users setting, the user, the turn, its target length, the cached tokens it
meant to reuse (its conversation so far), the task (a task other than single) and what scores the answer
again (`AnswerLabels`)."""

from __future__ import annotations

from ...records import RequestRecord
from ...text.tasks import AnswerLabels


class RampLabels(AnswerLabels):
    check: str = "ramp"
    users: int | None = None
    user: int | None = None
    turn: int | None = None
    target_tokens: int | None = None
    intended_cached_tokens: int | None = None
    task: str | None = None


def user_of(record: RequestRecord) -> int | None:
    """A ramp record's user (`decode_stall.user_stalls` tells users apart by it)."""
    return RampLabels.of(record).user
