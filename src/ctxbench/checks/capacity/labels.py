"""The capacity check's request labels: its two prompts, `near_limit` and `over_limit` (`labels.OVER_LIMIT`,
which the records know as the prompt refused by design)."""

from __future__ import annotations

from typing import Final, Literal

from ...labels import OVER_LIMIT, Labels

NEAR_LIMIT: Final = "near_limit"


class CapacityLabels(Labels):
    check: str = "capacity"
    prompt: Literal["near_limit", "over_limit"] | None = None


__all__ = ["NEAR_LIMIT", "OVER_LIMIT", "CapacityLabels"]
