"""`capacity.json`, the capacity check's summary (check.py): the limit and where it was read, the prompt near
it (accepted? the server's count, the prefill) and the one over it (how it was refused)."""

from __future__ import annotations

from typing import ClassVar

from ...store.check_files import CheckFile


class CapacityFile(CheckFile):
    """Claim 1: one fresh prompt just under the limit, one over it."""

    FILE: ClassVar[str] = "capacity.json"
    limit_tokens: int
    limit_source: str
    target_tokens: int
    accepted: bool
    prompt_tokens: int | None
    count_error_tokens: int | None
    prefill_s: float | None
    prefill_tokens_per_s: float | None
    near_limit_error: str | None
    over_limit_tokens: int
    over_limit_rejected: bool
    over_limit_outcome: str
    request_ids: tuple[str, str]
    holds: bool  # accepted near the limit and rejected over it as a context-limit error

    @property
    def miscounted(self) -> str | None:
        """The near-limit prompt was answered but the server counted it otherwise than planned: a counting
        mismatch (its chat template or tokenizer is not the counter's), not a capacity verdict; its words."""
        error = self.near_limit_error or ""
        return error.removeprefix("prompt_not_planned: ") if error.startswith("prompt_not_planned") else None
