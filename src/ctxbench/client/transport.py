"""A lean HTTP/1.1 transport for httpx, made for many long-lived streamed responses.

Measured first (docs/performance.md): with httpx's default transport, most of ctxbench's CPU per streamed
event went to httpcore and anyio on every socket read (a cancel scope and the h11 state machine per read),
not to ctxbench; asyncio streams with a timeout per read still cost ~140 Python calls an event. This
transport keeps httpx's API (requests, responses, timeouts, the `trace` extension the client's retry rule
reads) and does the wire work on non-blocking sockets in the event loop (`wire.py`: every arrival stamped in
the read callback, before any parsing, with the kernel's receive time where the platform gives it, and
queued); the reader takes everything queued in one wake-up. The read timeout is
one watchdog per connection that looks at the last arrival when it fires, not a timer per read. Chunked
framing is decoded in place, keep-alive connections are pooled per host. Plain HTTP only (ctxbench measures
servers on the machine or the node); `https://` URLs use httpx's own transport.

A response from this transport carries its stamped body in `response.extensions[STAMPED]`
(`StampedBody.next_batch()`: the body bytes with the time each arrived) and the arrival time of its
status line in `response.extensions[HEAD_NS]`; iterating the response as usual gives the same bytes.

Errors are httpx's: `ConnectError`, `ConnectTimeout`, `ReadTimeout`, `WriteTimeout`, `ReadError`,
`RemoteProtocolError` (a peer that closed before finishing a response), so callers cannot tell the
difference except by speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

from .wire import Piece, Wire

STAMPED = "ctxbench.stamped_body"
HEAD_NS = "ctxbench.head_arrived_ns"

_MAX_HEAD = 1 << 16


class StampedBody(httpx.AsyncByteStream):
    """The response body as it arrives, with arrival stamps; returns the connection to the pool at its end."""

    def __init__(
        self,
        transport: LeanTransport,
        key: tuple[str, int],
        wire: Wire,
        framing: str,
        length: int | None,
        read_timeout: float | None,
        keep_alive: bool,
    ) -> None:
        self._transport = transport
        self._key = key
        self._wire: Wire | None = wire
        self._framing = framing
        self._remaining = length or 0  # framing "length": body bytes still to come
        self._timeout = read_timeout
        self._keep_alive = keep_alive
        self._chunked = _Dechunker() if framing == "chunked" else None
        self._finished = framing == "length" and not length

    async def next_batch(self) -> list[Piece] | None:
        """The body bytes that arrived since the last call, each with its arrival time; None at the body's
        end."""
        while not self._finished:
            assert self._wire is not None
            pieces = await self._wire.take(self._timeout)
            if not pieces:  # the peer closed
                if self._chunked is not None and self._chunked.last_chunk_read:
                    self._keep_alive = False  # the body is whole; only its trailer's end is missing
                    self._finished = True
                    break
                if self._framing != "close":
                    raise httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                self._keep_alive = False
                self._finished = True
                break
            if self._chunked is not None:
                body, self._finished = self._chunked.feed(pieces)
            elif self._framing == "length":
                body = []
                for index, (arrived_ns, data) in enumerate(pieces):
                    if len(data) >= self._remaining:
                        body.append((arrived_ns, data[: self._remaining]))
                        if len(data) > self._remaining or index + 1 < len(pieces):
                            self._keep_alive = False  # bytes beyond the body: the connection is not clean
                        self._remaining = 0
                        self._finished = True
                        break
                    body.append((arrived_ns, data))
                    self._remaining -= len(data)
            else:
                body = pieces
            if body:
                return body
        self._release()
        return None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (batch := await self.next_batch()) is not None:
            for _, data in batch:
                yield data

    def _release(self) -> None:
        wire, self._wire = self._wire, None
        if wire is not None:
            self._transport._give_back(self._key, wire, self._keep_alive)

    async def aclose(self) -> None:
        wire, self._wire = self._wire, None
        if wire is not None:  # not read to its end: the connection's state is unknown
            wire.close()


class _Dechunker:
    """`Transfer-Encoding: chunked`, decoded piece by piece: each piece's payload keeps its arrival stamp."""

    def __init__(self) -> None:
        self._buffer = b""
        self._size: int | None = None  # bytes left in the current chunk; None: a size line comes next
        self._crlf = False  # the CRLF after a chunk's data is next
        self.last_chunk_read = False  # the zero-size chunk was read; trailers follow

    def feed(self, pieces: list[Piece]) -> tuple[list[Piece], bool]:
        out: list[Piece] = []
        for arrived_ns, data in pieces:
            buffer = self._buffer + data if self._buffer else data
            self._buffer = b""
            start = 0
            n = len(buffer)
            while start < n:
                if self.last_chunk_read:
                    rest = buffer[start:]
                    # Usually just CRLF; otherwise trailer fields ending with an empty line.
                    if rest.startswith(b"\r\n") or b"\r\n\r\n" in rest:
                        return out, True
                    self._buffer = rest
                    break
                if self._crlf:
                    if n - start < 2:
                        self._buffer = buffer[start:]
                        break
                    start += 2
                    self._crlf = False
                    continue
                if self._size is None:
                    line_end = buffer.find(b"\r\n", start)
                    if line_end < 0:
                        self._buffer = buffer[start:]
                        break
                    try:
                        self._size = int(buffer[start:line_end].split(b";")[0], 16)
                    except ValueError:
                        raise httpx.RemoteProtocolError(
                            f"bad chunk size line {buffer[start:line_end][:40]!r}"
                        ) from None
                    start = line_end + 2
                    if self._size == 0:
                        self.last_chunk_read = True
                    continue
                take = min(self._size, n - start)
                out.append((arrived_ns, buffer[start : start + take]))
                start += take
                self._size -= take
                if self._size == 0:
                    self._size = None
                    self._crlf = True
        return out, False


class LeanTransport(httpx.AsyncBaseTransport):
    """httpx transport over an asyncio protocol for `http://` URLs (see the module docstring)."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[Wire]] = {}
        self._fallback: httpx.AsyncHTTPTransport | None = None

    def _give_back(self, key: tuple[str, int], wire: Wire, keep_alive: bool) -> None:
        if keep_alive and not wire.closed:
            self._idle.setdefault(key, []).append(wire)
        else:
            wire.close()

    async def _connect(self, key: tuple[str, int], timeout: float | None, trace: Any) -> tuple[Wire, bool]:
        while self._idle.get(key):
            wire = self._idle[key].pop()
            if wire.reusable():
                return wire, True
            wire.close()
        if trace is not None:
            await trace("connection.connect_tcp.started", {"host": key[0], "port": key[1]})
        try:
            async with asyncio.timeout(timeout):
                wire = await Wire.open(asyncio.get_running_loop(), key[0], key[1])
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to {key[0]}:{key[1]} within {timeout} s") from None
        except OSError as exc:
            raise httpx.ConnectError(f"[Errno {exc.errno}] {exc.strerror or exc}") from None
        if trace is not None:
            await trace("connection.connect_tcp.complete", {"host": key[0], "port": key[1]})
        return wire, False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            self._fallback = self._fallback or httpx.AsyncHTTPTransport(retries=0)
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        trace = request.extensions.get("trace")
        key = (request.url.host, request.url.port or 80)
        body = await request.aread()
        wire, reused = await self._connect(key, timeouts.get("connect"), trace)
        try:
            return await self._exchange(request, body, wire, reused, key, timeouts, trace)
        except BaseException:  # an error, or a cancellation (a total timeout) while waiting for the response
            wire.close()
            raise

    async def _exchange(
        self,
        request: httpx.Request,
        body: bytes,
        wire: Wire,
        reused: bool,
        key: tuple[str, int],
        timeouts: dict[str, Any],
        trace: Any,
    ) -> httpx.Response:
        target = request.url.raw_path.decode("ascii")
        lines = [f"{request.method} {target} HTTP/1.1"]
        headers = [
            (k, v)
            for k, v in request.headers.multi_items()
            if k.lower() not in ("content-length", "transfer-encoding")
        ]
        lines += [f"{k}: {v}" for k, v in headers] + [f"Content-Length: {len(body)}"]
        if trace is not None:
            await trace("http11.send_request_headers.started", {"request": request})
        if wire.closed:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        try:
            wire.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            async with asyncio.timeout(timeouts.get("write")):
                await wire.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("the request could not be written in time") from None
        head, head_ns = await _read_head(wire, timeouts.get("read"))
        status, response_headers = _parse_head(head)
        fields = {k.lower(): v for k, v in response_headers}
        keep_alive = fields.get("connection", "").lower() != "close"
        if "chunked" in fields.get("transfer-encoding", "").lower():
            framing, length = "chunked", None
        elif "content-length" in fields:
            framing, length = "length", int(fields["content-length"])
        elif status in (204, 304) or request.method == "HEAD":
            framing, length = "length", 0
        else:
            framing, length = "close", None
        stream = StampedBody(self, key, wire, framing, length, timeouts.get("read"), keep_alive)
        return httpx.Response(
            status,
            headers=response_headers,
            stream=stream,
            extensions={
                "http_version": b"HTTP/1.1",
                "connection_reused": reused,
                STAMPED: stream,
                HEAD_NS: head_ns,
            },
        )

    async def aclose(self) -> None:
        for wires in self._idle.values():
            for wire in wires:
                wire.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()


async def _read_head(wire: Wire, timeout_s: float | None) -> tuple[bytes, int]:
    """The status line and headers, and when their first byte arrived; what follows goes back to the wire."""
    head = b""
    head_ns = 0
    while True:
        pieces = await wire.take(timeout_s)
        if not pieces:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        for index, (arrived_ns, data) in enumerate(pieces):
            head_ns = head_ns or arrived_ns
            searched_from = max(0, len(head) - 3)
            head += data
            end = head.find(b"\r\n\r\n", searched_from)
            if end >= 0:
                rest = head[end + 4 :]
                later = ([(arrived_ns, rest)] if rest else []) + pieces[index + 1 :]
                if later:
                    wire.unread(later)
                return head[: end + 4], head_ns
            if len(head) > _MAX_HEAD:
                raise httpx.RemoteProtocolError("response headers too large")


def _parse_head(head: bytes) -> tuple[int, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP response: {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers.append((name.strip(), value.strip()))
    return int(parts[1]), headers
