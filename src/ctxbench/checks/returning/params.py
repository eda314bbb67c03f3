"""The returning-users check's parameters: its `[checks.returning]` table."""

from __future__ import annotations

from pydantic import Field

from ...config.param_types import Strict, Tokens


class ReturningParams(Strict):
    """Conversations of `context` tokens are built and answered (and asked again at once), other users'
    fresh prompts pass through the server, and each conversation returns: its TTFT and cached tokens beside
    the immediate return's and a fresh prefill's of the same length say whether its context was kept,
    restored or recomputed."""

    conversations: int = Field(4, ge=1, le=1024)
    context: Tokens = 32 * 1024  # each conversation's first prompt
    follow_up_tokens: int = Field(64, ge=16, le=65536)  # the new question a return adds
    filler_requests: int = Field(8, ge=0, le=100_000)  # other users' fresh prompts between build and return
    filler_tokens: Tokens | None = None  # each filler prompt; None: `context`
    max_tokens: int = Field(32, ge=1, le=65536)  # every reply, exactly (ignore_eos)

    def request_count(self) -> int:
        return self.conversations * 4 + self.filler_requests  # build, immediate, return, fresh; fillers
