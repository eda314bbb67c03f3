"""A lean HTTP/1.1 transport for httpx, made for many long-lived streamed responses.

Measured first (docs/performance.md): with httpx's default transport, most of ctxbench's CPU per streamed
event went to httpcore and anyio on every socket read (a cancel scope and the h11 state machine per read),
not to ctxbench. This transport keeps httpx's API (requests, responses, timeouts, the `trace` extension
the client's retry rule reads) and does the wire work with asyncio streams: one `read()` per arrival,
chunked framing decoded in place, keep-alive connections pooled per host. Plain HTTP only (ctxbench
measures servers on the machine or the node); `https://` URLs use httpx's own transport.

Errors are httpx's: `ConnectError`, `ConnectTimeout`, `ReadTimeout`, `WriteTimeout`, `ReadError`,
`RemoteProtocolError` (a peer that closed before finishing a response), so callers cannot tell the
difference except by speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

_READ_SIZE = 1 << 16
_MAX_HEAD = 1 << 16


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


class _Body(httpx.AsyncByteStream):
    """The response body as it arrives; returns the connection to the pool when read to its end."""

    def __init__(self, transport: LeanTransport, key: tuple[str, int], connection: _Connection, framing: str,
                 length: int | None, read_timeout: float | None, keep_alive: bool) -> None:
        self._transport = transport
        self._key = key
        self._connection: _Connection | None = connection
        self._framing = framing
        self._length = length
        self._timeout = read_timeout
        self._keep_alive = keep_alive

    async def _read(self) -> bytes:
        assert self._connection is not None
        try:
            async with asyncio.timeout(self._timeout):
                return await self._connection.reader.read(_READ_SIZE)
        except TimeoutError:
            raise httpx.ReadTimeout(f"no byte for {self._timeout} s") from None
        except (ConnectionError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._framing == "length":
            remaining = self._length or 0
            while remaining > 0:
                data = await self._read()
                if not data:
                    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
                remaining -= len(data)
                yield data
        elif self._framing == "chunked":
            async for data in self._chunks():
                yield data
        else:  # until the server closes
            while data := await self._read():
                yield data
            self._keep_alive = False
        self._release()

    async def _chunks(self) -> AsyncIterator[bytes]:
        """Decode `Transfer-Encoding: chunked`, yielding what each read delivered (no waiting for whole chunks)."""
        buffer = b""
        size: int | None = None  # bytes left in the current chunk; None: a size line comes next
        while True:
            if size is None:
                line_end = buffer.find(b"\r\n")
                if line_end < 0:
                    data = await self._read()
                    if not data:
                        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
                    buffer += data
                    continue
                try:
                    size = int(buffer[:line_end].split(b";")[0], 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"bad chunk size line {buffer[:line_end][:40]!r}") from None
                buffer = buffer[line_end + 2:]
                if size == 0:
                    await self._trailers(buffer)
                    return
            if not buffer:
                buffer = await self._read()
                if not buffer:
                    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
            piece, buffer = buffer[:size], buffer[size:]
            size -= len(piece)
            if piece:
                yield piece
            if size == 0:
                while len(buffer) < 2:  # the chunk's CRLF
                    data = await self._read()
                    if not data:
                        raise httpx.RemoteProtocolError("peer closed connection inside a chunk")
                    buffer += data
                buffer = buffer[2:]
                size = None

    async def _trailers(self, buffer: bytes) -> None:
        while b"\r\n" not in buffer:  # usually just the final CRLF
            data = await self._read()
            if not data:
                self._keep_alive = False
                return
            buffer += data
        if not buffer.startswith(b"\r\n"):
            while b"\r\n\r\n" not in buffer:
                data = await self._read()
                if not data:
                    self._keep_alive = False
                    return
                buffer += data

    def _release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._transport._give_back(self._key, connection, self._keep_alive)

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:  # not read to its end: the connection's state is unknown
            connection.close()


class LeanTransport(httpx.AsyncBaseTransport):
    """httpx transport over asyncio streams for `http://` URLs (see the module docstring)."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._fallback: httpx.AsyncHTTPTransport | None = None

    def _give_back(self, key: tuple[str, int], connection: _Connection, keep_alive: bool) -> None:
        if keep_alive and not connection.reader.at_eof():
            self._idle.setdefault(key, []).append(connection)
        else:
            connection.close()

    async def _connect(self, key: tuple[str, int], timeout: float | None, trace: Any) -> tuple[_Connection, bool]:
        while self._idle.get(key):
            connection = self._idle[key].pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection, True
            connection.close()
        if trace is not None:
            await trace("connection.connect_tcp.started", {"host": key[0], "port": key[1]})
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(key[0], key[1], limit=_MAX_HEAD)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to {key[0]}:{key[1]} within {timeout} s") from None
        except OSError as exc:
            raise httpx.ConnectError(f"[Errno {exc.errno}] {exc.strerror or exc}") from None
        if trace is not None:
            await trace("connection.connect_tcp.complete", {"host": key[0], "port": key[1]})
        return _Connection(reader, writer), False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            self._fallback = self._fallback or httpx.AsyncHTTPTransport(retries=0)
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        trace = request.extensions.get("trace")
        key = (request.url.host, request.url.port or 80)
        body = await request.aread()
        connection, reused = await self._connect(key, timeouts.get("connect"), trace)
        try:
            return await self._exchange(request, body, connection, reused, key, timeouts, trace)
        except BaseException:  # an error, or a cancellation (a total timeout) while waiting for the response
            connection.close()
            raise

    async def _exchange(self, request: httpx.Request, body: bytes, connection: _Connection, reused: bool,
                        key: tuple[str, int], timeouts: dict[str, Any], trace: Any) -> httpx.Response:
        target = request.url.raw_path.decode("ascii")
        lines = [f"{request.method} {target} HTTP/1.1"]
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in ("content-length", "transfer-encoding")]
        lines += [f"{k}: {v}" for k, v in headers] + [f"Content-Length: {len(body)}"]
        if trace is not None:
            await trace("http11.send_request_headers.started", {"request": request})
        try:
            connection.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            async with asyncio.timeout(timeouts.get("write")):
                await connection.writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("the request could not be written in time") from None
        except (ConnectionError, OSError) as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from None
        try:
            async with asyncio.timeout(timeouts.get("read")):
                head = await connection.reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            raise httpx.ReadTimeout(f"no response within {timeouts.get('read')} s") from None
        except asyncio.IncompleteReadError:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.") from None
        except asyncio.LimitOverrunError:
            raise httpx.RemoteProtocolError("response headers too large") from None
        except (ConnectionError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from None
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
        stream = _Body(self, key, connection, framing, length, timeouts.get("read"), keep_alive)
        return httpx.Response(status, headers=response_headers, stream=stream,
                              extensions={"http_version": b"HTTP/1.1", "connection_reused": reused})

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()


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
