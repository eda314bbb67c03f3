"""What every check's parameters are built from: token counts written as `8K` or `1M`, and the strict base
model (unknown keys refused, values frozen) that every `*Params` derives from."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

# A 1M-token prompt is ~4 MB of JSON and a prefill can be silent for minutes: the read timeout is the longest
# silence accepted between two bytes of an answer, not a limit on the whole request (`--read-timeout`,
# a deployment's `read_timeout_s`).
DEFAULT_READ_TIMEOUT_S = 1800.0
MAX_TOKENS_PER_PROMPT = 1 << 24  # 16M: beyond any model's window; a typo like 1000M is caught here
# The longest a recorded trace may ask a replay to wait (a gap, a delay, a line's time from the start): a
# day. A line asking for more is refused as read (a gap of 1e12 s waited for ever).
MAX_WAIT_S = 24 * 3600
_SUFFIXES = {"k": 1024, "m": 1024 * 1024}


def token_count(value: Any) -> int:
    """`8192`, `"8K"` (8192), `"1M"` (1048576), `"1.5K"`: context sizes count in powers of two."""
    if isinstance(value, bool):
        raise ValueError("a token count is a number or a string like '8K' or '1M', not true/false")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        cleaned = value.strip().lower()
        try:
            if cleaned and cleaned[-1] in _SUFFIXES:
                return int(float(cleaned[:-1]) * _SUFFIXES[cleaned[-1]])
            return int(cleaned)
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not a token count; write 8192, '8K' or '1M'")


Tokens = Annotated[int, BeforeValidator(token_count), Field(ge=1, le=MAX_TOKENS_PER_PROMPT)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
