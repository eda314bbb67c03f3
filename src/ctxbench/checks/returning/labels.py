"""The returning users' request labels: the phase (`Labels.phase`: build, immediate, filler, fresh, return),
the conversation's number and the cached tokens it meant to reuse."""

from __future__ import annotations

from ...labels import Labels

IN_CONVERSATION = ("build", "immediate", "return")  # the phases of one conversation; fillers and fresh: none


class ReturningLabels(Labels):
    check: str = "returning"
    conversation: int | None = None
    intended_cached_tokens: int | None = None
