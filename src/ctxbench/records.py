"""The typed, immutable records every later stage reads.

A `RequestRecord` holds what happened to one request and nothing derived from it: raw
`time.perf_counter_ns()` stamps, each streamed chunk with its text, the server's `usage`,
the HTTP status and a typed error. Metrics are computed from records in a second pass
(`ctxbench.measure.metrics`). Stamps are only comparable within one process; a run's manifest pairs
one `perf_counter_ns` reading with wall-clock time so they can be placed on a calendar.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .errors import ContextLimitExceeded, RequestFailed
from .labels import CHECK_LABEL, OVER_LIMIT, PHASE_LABEL, PROMPT_LABEL, WARMUP_LABEL, planned_of

# 3: `cache`, the cache intent the check declared; 2: `chunks` holds every token event, empty text included,
# and `tool_call`; 1 kept only events with text.
RECORD_VERSION = 3

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


class TokenLogprob(_Frozen):
    """One generated token's log-probability as the server streamed it (OpenAI `logprobs.content[i]`, asked
    with `logprobs` and `top_logprobs`): the token, its id where the server gives one (llama.cpp, vLLM), and
    the `top` alternatives as (token, id, logprob), most likely first."""

    token: str
    id: int | None = None
    logprob: float
    top: tuple[tuple[str, int | None, float], ...] = ()


class Usage(_Frozen):
    """Token counts as the server reported them in `usage`."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


Reuse = Literal[
    "fresh",  # nothing beyond the lead every prompt of its check shares
    "history",  # a conversation's earlier turns (ramp, sessions)
    "shared_prefix",  # a system prompt every request of the check carries
    "document",  # a document asked again (multi_depth's later questions)
    "trace_blocks",  # a replayed trace's blocks shared with requests that ran before it
    "returning",  # a conversation coming back after other users' traffic
    "same_prompt",  # the same prompt sent again on purpose (the probe's concurrent requests)
    "unbounded",  # a user's own prompts: ctxbench cannot know what they share, and says so
]


# Tokens a cache may serve beyond a declared bound without a finding: a tokenizer merges differently at the
# edge of the lead or of a block, so two prompts' shared prefix can run a few tokens past the counted one.
CACHE_SLACK_TOKENS = 16


class CacheIntent(_Frozen):
    """What a request may take from a prefix cache, declared by the check that built it (docs/metrics.md,
    "Cache intent"; the audit holds every request to it).

    `lead_tokens`: the lead every prompt of the check begins with (the chat template's opening and a fixed
    first line), which any prompt may find cached. `allowed_tokens`: the most prompt tokens the cache may
    serve, the lead included: the lead alone for a `fresh` prompt; for reuse, what `reuse` names besides
    (a conversation's history as the server holds it, a shared system prompt, the document, the trace's
    whole blocks); None for `unbounded`. `why` says it in words for the audit's findings."""

    reuse: Reuse
    lead_tokens: int
    allowed_tokens: int | None
    why: str

    def exceeded_by(self, cached: int | None) -> bool:
        """`cached` tokens are more than this intent allows (beyond `CACHE_SLACK_TOKENS`); never for unbounded
        reuse or a count the server did not report."""
        allowed = self.allowed_tokens
        return allowed is not None and cached is not None and cached > allowed + CACHE_SLACK_TOKENS

    @classmethod
    def fresh(cls, lead_tokens: int, why: str = "a fresh prompt") -> CacheIntent:
        return cls(reuse="fresh", lead_tokens=lead_tokens, allowed_tokens=lead_tokens, why=why)

    @classmethod
    def reusing(cls, reuse: Reuse, lead_tokens: int, allowed_tokens: int | None, why: str) -> CacheIntent:
        """Reuse of up to `allowed_tokens` in all, the lead included (None: unbounded)."""
        return cls(reuse=reuse, lead_tokens=lead_tokens, allowed_tokens=allowed_tokens, why=why)


class RequestError(_Frozen):
    """Why a request failed. `context_limit` and `server_prompt_tokens` come from the server's message."""

    kind: ErrorKind
    message: str
    context_limit: int | None = None
    server_prompt_tokens: int | None = None


def not_planned_head(message: str) -> str:
    """'server counted 3 tokens, planned 2048' from a prompt_not_planned error, as its record's message or
    as a summary file's "kind: message" text (the kind and the parenthesised detail dropped)."""
    return message.removeprefix("prompt_not_planned: ").split(" (", 1)[0]


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
    cache: CacheIntent | None = None  # None: sent by no check (a library call), or recorded before version 3
    retried: bool = False
    retry_reason: str | None = None
    malformed_lines: tuple[str, ...] = ()
    logprobs: tuple[TokenLogprob, ...] | None = None  # None: not asked for (or the server sent none)

    @property
    def ok(self) -> bool:
        return self.error is None

    # The labels every check writes (ctxbench/labels.py `Labels`), read through these and nowhere else by
    # their key: the check that sent it, the prompt tokens it planned, a warm-up request, its phase.
    @property
    def check(self) -> str:
        """The check that sent it ("" for a request no check sent: a library call)."""
        return self.labels.get(CHECK_LABEL, "")

    @property
    def planned_tokens(self) -> int | None:
        """The prompt tokens ctxbench planned for it (None where none was planned: a user's own prompt)."""
        return planned_of(self.labels)

    @property
    def warmup(self) -> bool:
        """A warm-up request, sent before a level's measured ones and left out of its figures."""
        return self.labels.get(WARMUP_LABEL) == "1"

    @property
    def phase(self) -> str:
        """The phase of its check it was sent in ("" where its check has none): the probe's `alone` or
        `concurrent`, the returning users' `build`, `immediate`..."""
        return self.labels.get(PHASE_LABEL, "")

    @property
    def failed_a_check(self) -> bool:
        """Failed, and a check needed it: not the capacity check's over-limit prompt rejected as over the
        limit (as it should be), not a request cut off by an interrupt (a resumed run sends it again)."""
        if self.error is None or self.error.kind == "interrupted":
            return False
        return not self.rejected_as_over_limit

    @property
    def refused_by_server(self) -> bool:
        """Failed a check because the server refused what was sent (HTTP 4xx: a prompt over its slot, a
        model it does not serve, a body it does not accept), not under load (5xx, a timeout, 408 or 429).
        Whether the run counts it against the deployment is its check's to say (`Check.counts_refusals`)."""
        status = self.http_status
        return self.failed_a_check and status is not None and 400 <= status < 500 and status not in (408, 429)

    @property
    def rejected_as_over_limit(self) -> bool:
        """The capacity check's over-limit prompt, refused as over the limit: what it was sent for."""
        return (
            self.labels.get(PROMPT_LABEL) == OVER_LIMIT
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


def requests_line(records: Sequence[RequestRecord]) -> str:
    """The run's request count, said one way on the console, at a glance and in the report's requests section:
    every request sent, those that failed a check (`failed_a_check`: not the capacity check's over-limit
    prompt, refused as it should be, named once here; not those cut off by an interrupt, counted apart), and
    those sent again on a new connection."""
    refused = sum(1 for r in records if r.rejected_as_over_limit)
    failed = sum(1 for r in records if r.failed_a_check)
    line = f"{len(records)} requests, {failed} failed"
    if refused:
        line += f" (and {refused} over-limit prompt{'s' if refused > 1 else ''} refused, as it should be)"
    if cut := sum(1 for r in records if r.error is not None and r.error.kind == "interrupted"):
        line += f"; {cut} cut off by an interrupt (sent again by the resumed run)"
    if retried := sum(1 for r in records if r.retried):
        line += f"; {retried} sent again on a new connection (the server closed a kept-alive one)"
    return line
