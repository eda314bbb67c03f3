"""The capacity check's parameters: its `[checks.capacity]` table."""

from __future__ import annotations

from pydantic import Field

from ...config.param_types import MAX_TOKENS_PER_PROMPT, Strict


class CapacityParams(Strict):
    """A prompt just under the server's limit (room for the reply and a margin), one `over_by_tokens` past."""

    output_tokens: int = Field(16, ge=1, le=65536)
    margin_tokens: int = Field(16, ge=0, le=65536)
    over_by_tokens: int = Field(256, ge=1, le=MAX_TOKENS_PER_PROMPT)
