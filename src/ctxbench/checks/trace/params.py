"""The trace-replay check's parameters: its `[checks.trace]` table."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ...config.param_types import Strict


class TraceParams(Strict):
    """A Mooncake-format trace (JSONL: timestamp ms, input_length, output_length, hash_ids) replayed at its
    own times, its shared hash ids as shared prompt prefixes."""

    file: Path  # local, never downloaded
    block_tokens: int = Field(512, ge=1, le=65536)  # tokens a hash id stands for (Mooncake's traces: 512)
    time_scale: float = Field(1.0, gt=0, le=1000)  # offsets multiplied: 0.5 replays twice as fast
    max_requests: int | None = Field(None, ge=1, le=1_000_000)  # the first N requests of the trace
    ignore_eos: bool = True  # every reply writes the trace's output_length
    ttft_slo_s: float | None = Field(None, gt=0)
    tpot_slo_s: float | None = Field(None, gt=0)
