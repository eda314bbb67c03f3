"""Small loopback servers the tests start in their own event loop (127.0.0.1 only).

- `KeepAliveDropper`: a proxy in front of a real server that answers each connection's first
  request, keeps the connection open as if kept alive, then drops it unanswered when the next
  request arrives: llama.cpp's stale keep-alive quirk, made deterministic.
- `ScriptedSse`: answers every request with a fixed SSE stream after a delay, and remembers
  each request's head and the size of its body.
"""

from __future__ import annotations

import asyncio
import json


def _without_connection_header(head: bytes, value: bytes | None) -> bytes:
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    if value is not None:
        lines.insert(1, b"Connection: " + value)
    return b"\r\n".join(lines)


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


class _Loopback:
    """A server on 127.0.0.1 that runs `_handle` for each connection, in the test's own event loop."""

    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter]

    async def start(self) -> str:
        self._writers = set()
        self._server = await asyncio.start_server(self._track, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        """Stop listening and close every connection still open, ours and upstream (Python 3.11's
        `Server.close` leaves them open; left to the garbage collector they warn in a later test)."""
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()

    async def _track(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        await self._handle(reader, writer)

    async def _upstream(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        self._writers.add(writer)
        return reader, writer

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class KeepAliveDropper(_Loopback):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.served = 0
        self.dropped = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head, body = await _read_request(reader)
            up_reader, up_writer = await self._upstream(self.upstream_port)
            up_writer.write(_without_connection_header(head, b"close") + body)
            response_head = await up_reader.readuntil(b"\r\n\r\n")
            writer.write(_without_connection_header(response_head, None))
            # Counted once the answer starts: a client may finish reading it before this handler sees the
            # upstream close, so counting at the end raced the test's assertion.
            self.served += 1
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
            up_writer.close()
            if await reader.read(1):
                self.dropped += 1
        finally:
            writer.close()


class ScriptedSse(_Loopback):
    def __init__(self, events: list[dict[str, object]], delay_s: float = 0.0) -> None:
        self.events = events
        self.delay_s = delay_s
        self.body_sizes: list[int] = []
        self.heads: list[bytes] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head, body = await _read_request(reader)
            self.heads.append(head)
            self.body_sizes.append(len(body))
            await asyncio.sleep(self.delay_s)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            for event in [*(json.dumps(e) for e in self.events), "[DONE]"]:
                data = f"data: {event}\n\n".encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        finally:
            writer.close()


async def _read_chunked(reader: asyncio.StreamReader) -> list[bytes]:
    """The chunks of a chunked HTTP body, until the terminating zero-size chunk or EOF."""
    chunks: list[bytes] = []
    while True:
        size_line = await reader.readline()
        if not size_line:
            return chunks
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return chunks
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


class FaultProxy(_Loopback):
    """A proxy in front of a real server that breaks responses on purpose, one fault a proxy:

    `reset` closes the connection after the first SSE event; `late` waits `delay_s` before any byte;
    `malformed` and `truncated` insert a non-JSON line and a half JSON event after the first event;
    `stall` sends the first event, then nothing for `delay_s`; `http500` and `http429` answer at once
    without asking the server (429 with `Retry-After: 7`). Other requests pass through untouched.
    """

    def __init__(self, upstream_port: int, fault: str, delay_s: float = 2.0) -> None:
        self.upstream_port = upstream_port
        self.fault = fault
        self.delay_s = delay_s

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head, body = await _read_request(reader)
            if self.fault in ("http500", "http429"):
                status = b"500 Internal Server Error" if self.fault == "http500" else b"429 Too Many Requests"
                extra = b"Retry-After: 7\r\n" if self.fault == "http429" else b""
                text = b'{"error": {"message": "injected fault"}}'
                writer.write(
                    b"HTTP/1.1 "
                    + status
                    + b"\r\nContent-Type: application/json\r\n"
                    + extra
                    + f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n".encode()
                    + text
                )
                await writer.drain()
                return
            up_reader, up_writer = await self._upstream(self.upstream_port)
            up_writer.write(_without_connection_header(head, b"close") + body)
            response_head = await up_reader.readuntil(b"\r\n\r\n")
            chunks = await _read_chunked(up_reader)
            up_writer.close()
            if self.fault == "late":
                await asyncio.sleep(self.delay_s)
            writer.write(_without_connection_header(response_head, b"close"))
            for index, chunk in enumerate(chunks):
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await writer.drain()
                if index == 0 and self.fault == "reset":
                    writer.transport.abort()
                    return
                if index == 0 and self.fault in ("malformed", "truncated"):
                    bad = (
                        b"data: {not json at all\n\n"
                        if self.fault == "malformed"
                        else b'data: {"choices": [{"de\n\n'
                    )
                    writer.write(f"{len(bad):x}\r\n".encode() + bad + b"\r\n")
                if index == 0 and self.fault == "stall":
                    await asyncio.sleep(self.delay_s)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


class AlteringProxy(_Loopback):
    """A proxy in front of a real server that changes the answers of requests that may use the prefix cache
    (any without `"cache_prompt": false`), as a faulty cache would; cold requests pass untouched.

    `token`: from the third generated token on, a token the server never ranked (id 999999, text "⟂");
    `drift`: every chosen token's log-probability lowered by `drift`. Each SSE event is rewritten whole."""

    def __init__(self, upstream_port: int, alteration: str, drift: float = 0.5) -> None:
        self.upstream_port = upstream_port
        self.alteration = alteration
        self.drift = drift
        self.altered = 0  # answers changed

    def _alter(self, event: dict[str, object], seen: list[int]) -> dict[str, object]:
        for choice in event.get("choices") or []:  # type: ignore[attr-defined]
            for entry in (choice.get("logprobs") or {}).get("content") or []:
                if self.alteration == "drift":
                    entry["logprob"] -= self.drift
                elif seen[0] >= 2:
                    entry["id"], entry["token"] = 999999, "\u27c2"
                    choice["delta"]["content"] = "\u27c2"
                seen[0] += 1
        return event

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head, body = await _read_request(reader)
            cached = json.loads(body or b"{}").get("cache_prompt") is not False
            up_reader, up_writer = await self._upstream(self.upstream_port)
            up_writer.write(_without_connection_header(head, b"close") + body)
            response_head = await up_reader.readuntil(b"\r\n\r\n")
            chunks = await _read_chunked(up_reader)
            up_writer.close()
            if cached:
                self.altered += 1
                seen = [0]
                chunks = [
                    b"\n\n".join(
                        b"data: " + json.dumps(self._alter(json.loads(part[6:]), seen)).encode()
                        if part.startswith(b"data: {")
                        else part
                        for part in chunk.split(b"\n\n")
                    )
                    for chunk in chunks
                ]
            writer.write(_without_connection_header(response_head, b"close"))
            for chunk in chunks:
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
