"""The probe's parameters: its `[checks.probe]` table."""

from __future__ import annotations

from pydantic import Field

from ...config.param_types import Strict


class ProbeParams(Strict):
    """Short questions alone and concurrently; `document_chars` adds one request that reads fresh prose."""

    max_tokens: int = Field(96, ge=1, le=65536, description="Output budget per request.")
    concurrency: int = Field(2, ge=1, le=1024, description="Concurrent streams in the second phase.")
    document_chars: int = Field(4000, ge=0, le=10_000_000)
