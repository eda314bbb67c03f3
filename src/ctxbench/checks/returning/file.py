"""`returning.json`, the returning-users check's summary (check.py): each conversation's verdict
and TTFTs, and their medians. One model, written by the check and read by the report, the evidence cell and
the console; fields that came later have defaults, so files from any earlier run load."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from ...store.check_files import CheckFile, _Open

Verdict = Literal["cached", "partly cached", "recomputed", "not reported", "failed"]


class Conversation(_Open):
    """One conversation: built, asked again at once, pushed out by other users' prompts, back."""

    conversation: int
    history_tokens: int  # what the return can reuse: the immediate return's prompt
    return_tokens: int | None = None  # None: recorded before it was kept
    cached_on_return: int | None
    ttft_build_s: float | None = None
    ttft_immediate_s: float | None
    ttft_return_s: float | None
    ttft_fresh_s: float | None
    verdict: Verdict


class ReturningFile(CheckFile):
    """Returning users: each conversation's verdict and TTFTs, and their medians."""

    FILE: ClassVar[str] = "returning.json"
    spec: dict[str, Any]
    conversations: list[Conversation]
    verdicts: dict[str, int]
    ttft_immediate_s: float | None
    ttft_return_s: float | None
    ttft_fresh_s: float | None
