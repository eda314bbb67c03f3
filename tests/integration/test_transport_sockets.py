"""The lean transport over real loopback sockets: HTTP/1.1 framing split across reads, keep-alive reuse,
and a peer that breaks the framing."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from time import perf_counter_ns

import httpx
import pytest
from loopback import _Loopback, _read_request

from ctxbench.client.transport import HEAD_NS, STAMPED, LeanTransport

SSE = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'


class Scripted(_Loopback):
    """Answers each request on a connection with `pieces`, written one by one with a pause between them."""

    def __init__(self, pieces: list[bytes], pause_s: float = 0.005) -> None:
        self.pieces = pieces
        self.pause_s = pause_s
        self.connections = 0
        self.requests = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    await _read_request(reader)
                except asyncio.IncompleteReadError:
                    return
                self.requests += 1
                for piece in self.pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(self.pause_s)
        finally:
            writer.close()


async def get_all(url: str, transport: LeanTransport) -> list[bytes]:
    async with httpx.AsyncClient(transport=transport) as client:
        async with client.stream("POST", url + "/v1/completions", content=b"{}") as response:
            assert response.status_code == 200
            return [chunk async for chunk in response.aiter_raw()]


async def test_chunked_framing_split_anywhere_is_decoded_and_the_connection_reused() -> None:
    body = b"%x\r\n%s\r\n" % (len(SSE), SSE)
    # Size line, data and CRLF cut mid-way, then the last chunk and the trailer CRLF apart.
    pieces = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n",
        body[:1],
        body[1:7],
        body[7:-1],
        body[-1:] + body,
        b"0\r\n",
        b"\r\n",
    ]
    server = Scripted(pieces)
    url = await server.start()
    transport = LeanTransport()
    try:
        async with httpx.AsyncClient(transport=transport) as client:  # one client: closing it closes the pool
            bodies = []
            for _ in range(2):
                async with client.stream("POST", url + "/v1/completions", content=b"{}") as response:
                    bodies.append(b"".join([chunk async for chunk in response.aiter_raw()]))
        first, second = bodies
    finally:
        await transport.aclose()
        await server.close()
    assert first == second == SSE + SSE
    assert server.requests == 2 and server.connections == 1  # kept alive and reused


async def test_content_length_and_close_delimited_bodies() -> None:
    for pieces in (
        [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(SSE), SSE[:5], SSE[5:]],
        [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", SSE],
    ):
        server = _CloseAfter(pieces) if b"Connection: close" in pieces[0] else Scripted(pieces)
        url = await server.start()
        transport = LeanTransport()
        try:
            assert b"".join(await get_all(url, transport)) == SSE
        finally:
            await transport.aclose()
            await server.close()


class _CloseAfter(Scripted):
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        for piece in self.pieces:
            writer.write(piece)
        await writer.drain()
        writer.close()


async def test_a_body_cut_short_is_a_protocol_error_not_a_short_answer() -> None:
    server = _CloseAfter(
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"%x\r\n%s" % (len(SSE), SSE[:9])]
    )
    url = await server.start()
    transport = LeanTransport()
    try:
        with pytest.raises(httpx.RemoteProtocolError):
            await get_all(url, transport)
    finally:
        await transport.aclose()
        await server.close()


async def test_connect_refused_is_a_connect_error() -> None:
    from ctxbench.engines.server import free_port

    transport = LeanTransport()
    try:
        with pytest.raises(httpx.ConnectError):
            await get_all(f"http://127.0.0.1:{free_port()}", transport)
    finally:
        await transport.aclose()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"


async def test_arrivals_are_stamped_when_they_arrive_not_when_they_are_read() -> None:
    # Two events 0.2 s apart, read by a consumer that was busy for 0.6 s: the stamps keep the 0.2 s.
    server = Scripted([CHUNKED_HEAD, chunk(SSE), chunk(SSE), b"0\r\n\r\n"], pause_s=0.2)
    url = await server.start()
    transport = LeanTransport()
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("POST", url + "/v1/completions", content=b"{}") as response:
                head_ns = response.extensions[HEAD_NS]
                await asyncio.sleep(0.6)
                reading_ns = perf_counter_ns()
                pieces = []
                while (batch := await response.extensions[STAMPED].next_batch()) is not None:
                    pieces += batch
    finally:
        await transport.aclose()
        await server.close()
    assert b"".join(data for _, data in pieces) == SSE + SSE
    stamps = [arrived_ns for arrived_ns, _ in pieces]
    assert head_ns <= stamps[0] and stamps[-1] < reading_ns
    assert 0.15 < (stamps[-1] - stamps[0]) / 1e9 < 0.35


async def test_a_slow_trickle_is_not_a_read_timeout_but_a_longer_silence_is() -> None:
    # The read timeout is the longest silence between bytes: 8 pieces 0.25 s apart pass a 0.6 s timeout.
    pieces = [CHUNKED_HEAD, *(chunk(SSE) for _ in range(7)), b"0\r\n\r\n"]
    for timeout_s, expected in ((0.6, None), (0.1, httpx.ReadTimeout)):
        server = Scripted(pieces, pause_s=0.25)
        url = await server.start()
        transport = LeanTransport()
        try:
            async with httpx.AsyncClient(
                transport=transport, timeout=httpx.Timeout(5, read=timeout_s)
            ) as client:
                if expected is None:
                    async with client.stream("POST", url + "/v1/completions", content=b"{}") as response:
                        assert b"".join([c async for c in response.aiter_raw()]) == SSE * 7
                else:
                    with pytest.raises(expected):
                        async with client.stream("POST", url + "/v1/completions", content=b"{}") as response:
                            [c async for c in response.aiter_raw()]
        finally:
            await transport.aclose()
            await server.close()


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive times (SO_TIMESTAMPNS) are read on Linux")
async def test_bytes_that_arrive_while_the_loop_is_blocked_keep_their_kernel_arrival_time() -> None:
    # A server thread sends the body 0.1 s after the head; the client's event loop is blocked for 0.6 s
    # meanwhile. The stamp must say when the bytes arrived (~0.1 s), not when the loop read them (~0.6 s).
    listener = socket.create_server(("127.0.0.1", 0))
    sent_ns: list[int] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            connection.sendall(CHUNKED_HEAD)
            time.sleep(0.1)
            sent_ns.append(perf_counter_ns())
            connection.sendall(chunk(SSE) + b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    transport = LeanTransport()
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/completions"
            async with client.stream("POST", url, content=b"{}") as response:
                time.sleep(0.6)  # the whole loop is blocked: nothing reads the socket
                read_ns = perf_counter_ns()
                pieces = []
                while (batch := await response.extensions[STAMPED].next_batch()) is not None:
                    pieces += batch
    finally:
        await transport.aclose()
        listener.close()
        thread.join(5)
    assert b"".join(data for _, data in pieces) == SSE
    arrived_ns = pieces[0][0]
    assert sent_ns[0] <= arrived_ns < sent_ns[0] + 50_000_000  # within 50 ms of the send, not 0.5 s later
    assert read_ns - arrived_ns > 400_000_000
