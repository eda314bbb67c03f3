"""The typed, immutable records every later stage reads.

A `RequestRecord` holds what happened to one request and nothing derived from it: raw
`time.perf_counter_ns()` stamps, each streamed chunk with its text, the server's `usage`,
the HTTP status and a typed error. Metrics are computed from records in a second pass
(`ctxbench.metrics`). Stamps are only comparable within one process; a run's manifest pairs
one `perf_counter_ns` reading with wall-clock time so they can be placed on a calendar.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .errors import ContextLimitExceeded, RequestFailed

# 2: `chunks` holds every token event, empty text included, and `tool_call`; 1 kept only events with text.
RECORD_VERSION = 2

ErrorKind = Literal[
    "context_limit",  # HTTP 4xx saying the prompt is over the server's limit
    "http_status",  # any other non-200 answer
    "timeout",  # connect, read or total timeout
    "connect",  # nothing listening, refused
    "disconnected",  # the connection closed before the stream finished
    "stream_error",  # the server sent an error event inside a 200 stream
    "incomplete",  # the stream ended cleanly but without a finish reason or [DONE]
    "prompt_not_planned",  # answered, but the server counted a prompt far from the one planned
    "interrupted",  # still in flight when ctxbench was stopped (Ctrl-C): the answer never ended
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Chunk(_Frozen):
    """One streamed SSE event that carried a generated token, stamped when its bytes arrived.

    A token event is any choice with a content, reasoning or tool-call field, empty text included: vLLM
    streams one event per token, and a token that decodes to no visible text yet (half of a multi-byte
    character, a special token) arrives as `"content": ""`. Left out: the role announcement that opens
    a chat stream with no text and a closing event that carries only the finish reason (llama.cpp's);
    both arrive with a token event, first and last (docs/metrics.md, "Token events")."""

    arrived_ns: int
    text: str = ""
    reasoning: str = ""
    tool_call: str = ""  # a tool-call delta's function name and argument text


class Usage(_Frozen):
    """Token counts as the server reported them in `usage`."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


class RequestError(_Frozen):
    """Why a request failed. `context_limit` and `server_prompt_tokens` come from the server's message."""

    kind: ErrorKind
    message: str
    context_limit: int | None = None
    server_prompt_tokens: int | None = None


class RequestRecord(_Frozen):
    """Everything observed about one request; stamps are `time.perf_counter_ns()`."""

    record_version: int = RECORD_VERSION
    request_id: str
    endpoint: Literal["chat", "completions"]
    url: str
    model: str
    labels: dict[str, str] = {}
    request_bytes: int
    max_tokens: int | None = None
    enqueued_ns: int
    sent_ns: int
    first_byte_ns: int | None = None
    end_ns: int
    http_status: int | None = None
    chunks: tuple[Chunk, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    server_timings: dict[str, Any] | None = None
    error: RequestError | None = None
    retried: bool = False
    retry_reason: str | None = None
    malformed_lines: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def failed_a_check(self) -> bool:
        """Failed, and a check needed it: not the capacity check's over-limit prompt rejected as over the
        limit (as it should be), not a request cut off by an interrupt (a resumed run sends it again)."""
        if self.error is None or self.error.kind == "interrupted":
            return False
        return not self.rejected_as_over_limit

    @property
    def rejected_as_over_limit(self) -> bool:
        """The capacity check's over-limit prompt, refused as over the limit: what it was sent for."""
        return (
            self.labels.get("prompt") == "over_limit"
            and self.error is not None
            and (self.error.kind == "context_limit")
        )

    @property
    def text(self) -> str:
        """The generated answer (content only, reasoning excluded)."""
        return "".join(chunk.text for chunk in self.chunks)

    def raise_for_error(self) -> RequestRecord:
        """Return the record when it succeeded, else raise `ContextLimitExceeded` or `RequestFailed`."""
        error = self.error
        if error is None:
            return self
        if error.kind == "context_limit":
            raise ContextLimitExceeded(
                error.message, limit=error.context_limit, prompt_tokens=error.server_prompt_tokens
            )
        raise RequestFailed(f"request {self.request_id} to {self.url} failed ({error.kind}): {error.message}")
