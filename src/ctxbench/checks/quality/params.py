"""The quality check's parameters: its `[checks.quality]` table."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ...config.param_types import Strict


class QualityParams(Strict):
    """GSM8K accuracy, scored as lm-evaluation-harness does."""

    data: Path = Field(description="GSM8K test.jsonl (or a directory holding it); never downloaded.")
    samples: int = Field(100, ge=1, le=100_000, description="Problems to sample (seeded).")
    fewshot: int = Field(
        5, ge=0, le=64, description="Worked examples before each question (the file's last N)."
    )
    endpoint: Literal["chat", "completions"] = Field(
        "chat", description="chat or completions: they can differ by tens of points."
    )
    max_tokens: int = Field(
        512, ge=16, le=65536, description="Output budget per answer (generous: answers show working)."
    )
    concurrency: int = Field(8, ge=1, le=1024, description="Requests in flight at most.")
