"""The trace replay's request labels: `mode = "open"`, the request's `index`, its trace line and input
length, the cached tokens the trace's order implies (`expected_cached_tokens`), the block size, the prompt's
overhead and lead tokens, and the ids of its whole blocks (`whole_ids`, comma-separated), from which the cache
audit bounds its reuse by what ran before it."""

from __future__ import annotations

from typing import Literal

from ...labels import Labels


class TraceLabels(Labels):
    check: str = "trace"
    mode: Literal["open"] | None = None
    index: int | None = None
    trace_line: int | None = None
    input_length: int | None = None
    expected_cached_tokens: int | None = None
    block_tokens: int | None = None
    overhead_tokens: int | None = None
    lead_tokens: int | None = None
    whole_ids: str | None = None

    @property
    def block_ids(self) -> tuple[int, ...]:
        return tuple(int(i) for i in (self.whole_ids or "").split(",") if i)
