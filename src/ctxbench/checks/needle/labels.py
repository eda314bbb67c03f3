"""The needle's request labels: the document's length, the needle's depth, a question asked again of a
document already sent (`reuse = "document"`), the control's trials, the task (a task other than single), and
what scores the answer again (`AnswerLabels`)."""

from __future__ import annotations

from typing import Literal

from pydantic import field_serializer

from ...text.tasks import AnswerLabels


class NeedleLabels(AnswerLabels):
    check: str = "needle"
    length: int | None = None
    depth: float | None = None
    reuse: Literal["document"] | None = None
    control: bool = False
    task: str | None = None

    @field_serializer("depth")
    def _depth(self, depth: float | None) -> str | None:
        return None if depth is None else f"{depth:.2f}"
