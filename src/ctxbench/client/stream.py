"""Streaming client for OpenAI-compatible `/v1/chat/completions` and `/v1/completions`.

One asyncio process drives any number of concurrent streams. The client records raw
`perf_counter_ns` stamps and the server's words; it derives nothing (see `metrics`).
A failed request comes back as a `RequestRecord` with a typed `error`, never as an exception.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, Literal, TypedDict, Unpack

import httpx
from pydantic import TypeAdapter

from ..config.param_types import DEFAULT_READ_TIMEOUT_S
from ..labels import planned_of
from ..records import CacheIntent, Chunk, RequestError, RequestRecord, TokenLogprob, Usage
from . import answers
from .answers import closing_event, http_error, not_a_stream, token_of, unplanned_prompt, usage_of
from .gc_pause import NO_FULL_COLLECTIONS
from .request_json import RequestJson
from .sse import SseDecoder
from .transport import HEAD_NS, STAMPED, LeanTransport, StampedBody

Message = Mapping[str, Any]
TransportFactory = Callable[[], httpx.AsyncBaseTransport]

_MALFORMED_KEEP_CHARS = 300


@dataclass(frozen=True)
class Timeouts:
    """Connect: TCP connect. Read: longest silence between bytes. Total: whole request, None for none."""

    connect_s: float = 10.0
    read_s: float = DEFAULT_READ_TIMEOUT_S
    write_s: float = 300.0
    total_s: float | None = None

    def to_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect_s, read=self.read_s, write=self.write_s, pool=None)


_CHUNKS = TypeAdapter(tuple[Chunk, ...])


class SendOptions(TypedDict, total=False):
    """What a request carries besides its messages: `max_tokens`; its `request_id` and `labels`, recorded;
    `extra_body`, merged into the JSON (e.g. `temperature`); `enqueued_ns`, when it was due (queueing is
    shown, never hidden); `cache`, what the check that built it says it may take from a prefix cache;
    `headers`, sent with it (a session's id)."""

    max_tokens: int | None
    request_id: str | None
    labels: Mapping[str, str] | None
    extra_body: Mapping[str, Any] | None
    enqueued_ns: int | None
    cache: CacheIntent | None
    headers: Mapping[str, str] | None


def _default_transport() -> httpx.AsyncBaseTransport:
    # Never retries on its own (a retry would hide a failure we record); lean per read (docs/performance.md).
    return LeanTransport()


class Client:
    """Sends streamed requests to one OpenAI-compatible server and returns `RequestRecord`s.

    `transport_factory` makes the transport for the shared connection pool and for the one fresh
    connection a retry uses; tests pass one that returns `httpx.MockTransport`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeouts: Timeouts | None = None,
        api_key: str | None = None,
        transport_factory: TransportFactory = _default_transport,
        on_interrupted: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeouts = timeouts or Timeouts()
        self._headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._transport_factory = transport_factory
        self.on_interrupted = on_interrupted  # given the record of a request cancelled in flight (Ctrl-C)
        self._api_key = api_key
        self._json = RequestJson()
        self._http = self._new_http()

    def settings(self) -> dict[str, Any]:
        """What another process needs to make the same client (its default transport): base URL, model,
        timeouts, API key. Contains the key: hand it over a pipe, never on a command line or in a file."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "timeouts": self.timeouts,
            "api_key": self._api_key,
        }

    def _new_http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=self._transport_factory(), timeout=self.timeouts.to_httpx(), headers=self._headers
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def chat(
        self, messages: Sequence[Message], *, conversation: str | None = None, **options: Unpack[SendOptions]
    ) -> RequestRecord:
        """Stream one chat completion (`SendOptions`). `conversation` names the conversation a request
        continues: one server ignores it; a `Router` over replicas keeps a conversation on the replica that
        holds its prefix cache."""
        return await self._send("chat", {"model": self.model, "messages": list(messages)}, **options)

    async def complete(
        self, prompt: str, *, conversation: str | None = None, **options: Unpack[SendOptions]
    ) -> RequestRecord:
        """Stream one text completion (`conversation` as in `chat`)."""
        return await self._send("completions", {"model": self.model, "prompt": prompt}, **options)

    async def _send(
        self,
        endpoint: Literal["chat", "completions"],
        body: dict[str, Any],
        *,
        max_tokens: int | None = None,
        request_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        enqueued_ns: int | None = None,
        cache: CacheIntent | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RequestRecord:
        enqueued = enqueued_ns if enqueued_ns is not None else perf_counter_ns()
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body.update(extra_body or {})
        payload = self._json.encode(body)
        path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
        attempt = _Attempt(
            url=self.base_url + path,
            endpoint=endpoint,
            request_id=request_id or uuid.uuid4().hex,
            labels=dict(labels or {}),
            model=self.model,
            payload=payload,
            max_tokens=max_tokens,
            enqueued_ns=enqueued,
            cache=cache,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        with NO_FULL_COLLECTIONS:
            outcome = await self._run(attempt, self._http)
            if outcome.retryable:
                # The server closed a pooled keep-alive connection under us before answering anything:
                # the request never reached it, so sending it again on a new connection is safe.
                fresh = self._new_http()
                try:
                    retry = await self._run(attempt, fresh)
                finally:
                    await fresh.aclose()
                return retry.record(
                    retried=True, retry_reason=outcome.error.message if outcome.error else None
                )
            return outcome.record()

    async def _run(self, attempt: _Attempt, http: httpx.AsyncClient) -> _Outcome:
        outcome = _Outcome(attempt)
        try:
            if self.timeouts.total_s is None:
                await outcome.stream(http)
            else:
                async with asyncio.timeout(self.timeouts.total_s):
                    await outcome.stream(http)
        except TimeoutError:
            outcome.fail("timeout", f"no complete answer within {self.timeouts.total_s} s (total timeout)")
        except httpx.TimeoutException as exc:
            outcome.fail("timeout", f"{type(exc).__name__}: {exc or 'timed out'}")
        except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.ProxyError) as exc:
            outcome.fail("connect", f"cannot connect to {attempt.url}: {exc}")
        except httpx.InvalidURL as exc:
            outcome.fail("connect", f"cannot send to {attempt.url}: {exc}")
        except httpx.TransportError as exc:  # read, write, protocol, close, decoding: the answer broke off
            outcome.fail("disconnected", f"{type(exc).__name__}: {exc}")
        except asyncio.CancelledError:  # ctxbench is stopping (Ctrl-C): what was in flight is recorded
            outcome.fail("interrupted", "ctxbench was stopped before the answer ended (Ctrl-C)")
            outcome.end_ns = perf_counter_ns()
            if self.on_interrupted is not None:
                self.on_interrupted(outcome.record())
            raise
        outcome.end_ns = outcome.end_ns or perf_counter_ns()
        return outcome


@dataclass(frozen=True)
class _Attempt:
    url: str
    endpoint: Literal["chat", "completions"]
    request_id: str
    labels: dict[str, str]
    model: str
    payload: bytes
    max_tokens: int | None
    enqueued_ns: int
    cache: CacheIntent | None
    headers: dict[str, str]


class _Outcome:
    """Mutable state of one attempt while its stream runs; frozen into a record at the end."""

    def __init__(self, attempt: _Attempt) -> None:
        self.attempt = attempt
        self.sent_ns = 0
        self.first_byte_ns: int | None = None
        self.end_ns = 0
        self.status: int | None = None
        self.chunks: list[tuple[int, str, str, str]] = []
        self.empty_finish_last = False  # the last token event carried only the finish reason
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.timings: dict[str, Any] | None = None
        self.error: RequestError | None = None
        self.malformed: list[str] = []
        self.logprobs: list[dict[str, Any]] = []
        self.done = False
        self.opened_connection = False

    @property
    def retryable(self) -> bool:
        return (
            self.error is not None
            and self.error.kind == "disconnected"
            and self.first_byte_ns is None
            and not self.opened_connection
        )

    async def _trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event.startswith("connection.connect_tcp") or event.startswith("connection.connect_unix"):
            self.opened_connection = True
        elif event == "http11.send_request_headers.started":
            # The request is written now: opening a connection before it (a resolver thread hop in anyio,
            # 50 ms on a process's first request) is the client's own time, and goes to queueing, not TTFT.
            self.sent_ns = perf_counter_ns()

    def fail(self, kind: str, message: str, **extra: Any) -> None:
        if self.error is None:
            self.error = RequestError(kind=kind, message=message, **extra)

    async def stream(self, http: httpx.AsyncClient) -> None:
        request = http.build_request(
            "POST",
            self.attempt.url,
            content=self.attempt.payload,
            headers=self.attempt.headers,
            extensions={"trace": self._trace},
        )
        self.sent_ns = perf_counter_ns()
        response = await http.send(request, stream=True)
        try:
            # The lean transport stamps every arrival as it is received; other transports are stamped here.
            self.first_byte_ns = response.extensions.get(HEAD_NS) or perf_counter_ns()
            self.status = response.status_code
            if response.status_code != 200:
                body = await response.aread()
                self.end_ns = perf_counter_ns()
                self.error = http_error(response.status_code, body, response.headers.get("retry-after"))
                return
            content_type = response.headers.get("content-type", "")
            if content_type and not content_type.lower().startswith("text/event-stream"):
                self.error = not_a_stream(content_type, await response.aread())
                self.end_ns = perf_counter_ns()
                return
            decoder = SseDecoder()
            stamped: StampedBody | None = response.extensions.get(STAMPED)
            if stamped is not None and not response.headers.get("content-encoding"):
                while (batch := await stamped.next_batch()) is not None:
                    for arrived_ns, raw in batch:
                        for data in decoder.feed(raw):
                            self._event(data, arrived_ns)
            else:
                async for raw in response.aiter_bytes():
                    arrived_ns = perf_counter_ns()
                    for data in decoder.feed(raw):
                        self._event(data, arrived_ns)
            self.end_ns = perf_counter_ns()
            for data in decoder.close():
                self._event(data, self.end_ns)
        finally:
            await response.aclose()
        if not self.done and self.finish_reason is None:
            self.fail("incomplete", "the stream ended without a finish reason or [DONE]")

    def _event(self, data: str, arrived_ns: int) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            self._lines_one_by_one(data, arrived_ns)
            return
        if not isinstance(event, dict):
            self.malformed.append(data[:_MALFORMED_KEEP_CHARS])
            return
        self._json_event(event, data, arrived_ns)

    def _lines_one_by_one(self, data: str, arrived_ns: int) -> None:
        # Some servers omit the blank line between events, so several JSON objects arrive as one
        # multi-line event; parse each line before calling the data malformed.
        lines = data.split("\n")
        if len(lines) > 1:
            for line in lines:
                self._event(line, arrived_ns)
        else:
            self.malformed.append(data[:_MALFORMED_KEEP_CHARS])

    def _json_event(self, event: dict[str, Any], data: str, arrived_ns: int) -> None:
        if "error" in event:
            error = event["error"]
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            self.fail("stream_error", message)
            return
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.usage = usage_of(usage)
        timings = event.get("timings")
        if isinstance(timings, dict):
            self.timings = timings
        choices = event.get("choices")
        if not isinstance(choices, list) or not choices:
            return
        choice = choices[0]
        if not isinstance(choice, dict):
            self.malformed.append(data[:_MALFORMED_KEEP_CHARS])
            return
        finish = choice.get("finish_reason")
        if finish:
            self.finish_reason = str(finish)
        if "logprobs" in choice:  # asked for (the fidelity check): most streams carry none
            self.logprobs += answers.logprobs_of(choice["logprobs"])
        token = token_of(choice)
        if token is not None:
            self.chunks.append((arrived_ns, *token))
            self.empty_finish_last = bool(finish) and not any(token)

    def record(self, *, retried: bool = False, retry_reason: str | None = None) -> RequestRecord:
        attempt = self.attempt
        completion = self.usage.completion_tokens if self.usage is not None else None
        if closing_event(self.empty_finish_last, len(self.chunks), completion):
            self.chunks.pop()
        if self.error is None:
            self.error = unplanned_prompt(planned_of(attempt.labels or {}), self.usage)
        return RequestRecord(
            request_id=attempt.request_id,
            endpoint=attempt.endpoint,
            url=attempt.url,
            model=attempt.model,
            labels=attempt.labels,
            cache=attempt.cache,
            request_bytes=len(attempt.payload),
            max_tokens=attempt.max_tokens,
            enqueued_ns=attempt.enqueued_ns,
            sent_ns=self.sent_ns or self.end_ns,
            first_byte_ns=self.first_byte_ns,
            end_ns=self.end_ns,
            http_status=self.status,
            # One validation call for all chunks, as a stream ends: 40% less time than a model per chunk.
            chunks=_CHUNKS.validate_python(
                [{"arrived_ns": t, "text": x, "reasoning": r, "tool_call": c} for t, x, r, c in self.chunks]
            ),
            usage=self.usage,
            finish_reason=self.finish_reason,
            server_timings=self.timings,
            error=self.error,
            retried=retried,
            retry_reason=retry_reason,
            malformed_lines=tuple(self.malformed),
            logprobs=tuple(TokenLogprob.model_validate(entry) for entry in self.logprobs) or None,
        )
