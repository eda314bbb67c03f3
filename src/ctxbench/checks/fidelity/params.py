"""The cache-fidelity check's parameters: its `[checks.fidelity]` table."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...config.param_types import Strict, Tokens

FidelityPath = Literal["warm", "partial", "restored", "load"]


class FidelityParams(Strict):
    """Does the cache return the same answer? At each length, one fresh document asked greedily with the
    engine's log-probabilities: computed cold twice (the engine's own noise), then served warm (the same
    prompt, its prefix cached), partly cached (a different question over the same document) and cold among
    `load_users` other requests; each compared token by token with its cold answer (docs/metrics.md, "Cache
    fidelity"). `restored`: the same prompt again after `evict_requests` other prompts of the same length
    pushed it out of the slots, so that it comes back from a second tier where the engine has one (llama.cpp's
    host-RAM prompt cache, `--cache-ram`; vLLM's CPU offload), else is recomputed (its cached tokens say)."""

    lengths: list[Tokens] = Field(
        default=[1024], min_length=1, max_length=16, description="Prompt lengths, one fresh document each."
    )
    max_tokens: int = Field(32, ge=1, le=4096, description="Greedy tokens compared per answer.")
    top_logprobs: int = Field(5, ge=1, le=20, description="Alternatives recorded per token.")
    paths: list[FidelityPath] = Field(
        default=["warm", "partial", "restored", "load"],
        min_length=1,
        description="Ways of serving the prompt compared with its cold one: warm, partial, restored, load.",
    )
    evict_requests: int = Field(2, ge=1, le=1024, description="Other prompts sent before the restored path.")
    load_users: int = Field(3, ge=1, le=256, description="Other fresh requests beside the load path's.")
    # The largest |difference| of a chosen token's log-probability that still reads as the same answer: the
    # last prompt token recomputed alone instead of inside a prefill batch moves it (llama.cpp CPU 0.005,
    # CUDA 0.042 warm and 0.057 partial at 250K); docs/metrics.md says how it was measured.
    drift_tolerance: float = Field(
        0.1,
        gt=0,
        le=10,
        description="Largest change of a chosen token's log-probability that reads as the same.",
    )

    def request_count(self) -> int:
        per_length = 2 + ("warm" in self.paths) + 2 * ("partial" in self.paths)
        per_length += (1 + self.evict_requests) if "restored" in self.paths else 0
        per_length += (1 + self.load_users) if "load" in self.paths else 0
        return per_length * len(self.lengths)
