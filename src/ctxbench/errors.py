"""Typed errors a user can act on. Each message says what happened and what to do."""

from __future__ import annotations


class CtxbenchError(Exception):
    """Base class for every error ctxbench raises on purpose."""


class ContextLimitExceeded(CtxbenchError):
    """The server rejected a prompt because it is longer than its context limit."""

    def __init__(self, message: str, *, limit: int | None = None, prompt_tokens: int | None = None) -> None:
        self.limit = limit
        self.prompt_tokens = prompt_tokens
        where = f" (limit {limit} tokens" + (f", prompt {prompt_tokens} tokens)" if prompt_tokens else ")")
        super().__init__(
            f"the server rejected the prompt as over its context limit{where if limit else ''}: {message}. "
            "Send a shorter prompt or start the server with a larger context."
        )


class RequestFailed(CtxbenchError):
    """A request ended with an error other than a context-limit rejection."""


class EngineNotReady(CtxbenchError):
    """An engine did not become ready; the message carries the tail of its log."""


class EngineBuildError(CtxbenchError):
    """Building an engine from source failed; the message carries the tail of the build log."""


class ModelPrepareError(CtxbenchError):
    """A model file could not be written or converted."""
