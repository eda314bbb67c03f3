"""One TCP connection on a non-blocking socket, in the event loop, with every arrival stamped as it comes.

The transport (`transport.py`) speaks HTTP/1.1 over it. What this module owns is the clock: each read is
stamped in the read callback, before any parsing, with the kernel's receive time of the bytes where the
platform gives it (`recvmsg` with `SO_TIMESTAMPNS`, Linux), moved onto `perf_counter_ns`; a busy event loop
then delays the read but not its stamp (docs/metrics.md, docs/performance.md).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from time import perf_counter_ns

import httpx

_READ_SIZE = 1 << 18
# The kernel's receive time of each read (Linux: SO_TIMESTAMPNS = 35; Python names it from 3.12 on).
_SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
_ANCILLARY_SIZE = socket.CMSG_SPACE(16) if _SO_TIMESTAMPNS is not None else 0
# Unread bytes a connection holds before it stops reading from the socket (the reader is behind).
_PAUSE_ABOVE = 1 << 22

Piece = tuple[int, bytes]  # (perf_counter_ns when it arrived, bytes)


class Wire:
    """One TCP connection on a non-blocking socket. Each arrival is stamped and queued in the read callback,
    before any parsing; `take()` hands over all that is queued.

    The socket is read with `recvmsg`, which also returns the kernel's receive time of the bytes
    (`SO_TIMESTAMPNS`, Linux): an arrival is stamped with that time, moved onto `perf_counter_ns`, so a busy
    event loop does not delay the stamp. The kernel time is used only when it falls between this connection's
    last write and the read itself (a clock step would put it outside); otherwise the read's own time is.
    Where bytes that arrived in several packets are read at once, the kernel reports the last packet's
    time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        _enable_kernel_stamps(sock)  # where the platform refuses, reads carry their own time
        self._pieces: list[Piece] = []
        self._queued = 0
        self._reading = True
        self._waiter: asyncio.Future[None] | None = None
        self._out = bytearray()
        self._drained: asyncio.Future[None] | None = None
        self.closed = False
        self._error: BaseException | None = None
        self._written_ns = 0
        self._quiet_since_ns = 0  # last arrival, or the last write when later
        self._timeout_s: float | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        loop.add_reader(self._fd, self._readable)

    @classmethod
    async def open(cls, loop: asyncio.AbstractEventLoop, host: str, port: int) -> Wire:
        try:  # a numeric address needs no resolver (asyncio's runs in a thread)
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        error: OSError = OSError(f"no address for {host}")
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                if family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            except BaseException:  # a connect timeout or a cancellation
                sock.close()
                raise
            return cls(loop, sock)
        raise error

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self._sock.recvmsg(_READ_SIZE, _ANCILLARY_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        now = perf_counter_ns()
        if not data:
            self._lost(None)
            return
        arrived = self._kernel_ns(ancillary, now) if ancillary else now
        self._pieces.append((arrived, data))
        self._quiet_since_ns = now
        self._queued += len(data)
        if self._queued > _PAUSE_ABOVE and self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)
        self._wake(None)

    def _kernel_ns(self, ancillary: list[tuple[int, int, bytes]], now: int) -> int:
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
                seconds, nanoseconds = struct.unpack_from("qq", data)
                # The kernel's clock is CLOCK_REALTIME: move it onto perf_counter_ns by the offset right now.
                arrived = (
                    seconds * 1_000_000_000 + nanoseconds - (time.clock_gettime_ns(time.CLOCK_REALTIME) - now)
                )
                if self._written_ns <= arrived <= now:
                    return arrived
        return now

    def reusable(self) -> bool:
        """Whether a pooled connection can carry another request: open, and the peer has neither closed it nor
        sent anything unasked. Read from the socket now, not left to the loop's next turn: llama-server closes
        the connection after every streamed reply without saying so, and a request built and sent at once
        found it closed every other time (sent again on a new connection, one round trip lost)."""
        if self.closed:
            return False
        try:
            self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as exc:
            self._lost(exc)
            return False
        self._lost(None)  # it read b"": the peer closed it; or bytes: an answer to nothing this client asked
        return False

    def _lost(self, error: BaseException | None) -> None:
        """The peer closed (error None) or the connection broke: stop watching the socket, wake the reader."""
        self._error = error
        self.close()

    # used by the transport
    def _wake(self, error: BaseException | None) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)

    def write(self, data: bytes) -> None:
        self._written_ns = self._quiet_since_ns = perf_counter_ns()
        if self.closed:
            return
        if not self._out:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._lost(exc)
                return
            if sent == len(data):
                return
            self._out += memoryview(data)[sent:]
            self._loop.add_writer(self._fd, self._writable)
        else:
            self._out += data

    def _writable(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        del self._out[:sent]
        if not self._out:
            self._loop.remove_writer(self._fd)
            if self._drained is not None and not self._drained.done():
                self._drained.set_result(None)

    async def drain(self) -> None:
        """Wait until the kernel has taken every byte written."""
        if self._out and not self.closed:
            self._drained = self._loop.create_future()
            await self._drained
        if self.closed and self._error is not None:
            raise httpx.WriteError(str(self._error) or type(self._error).__name__)

    async def take(self, timeout_s: float | None) -> list[Piece]:
        """All pieces queued since the last call, waiting for one if none is; [] once the peer has closed.

        Raises `httpx.ReadTimeout` after `timeout_s` without a byte, `httpx.ReadError` on a reset."""
        if not self._pieces and not self.closed:
            self._timeout_s = timeout_s
            if timeout_s is not None and self._watchdog is None:
                self._watchdog = self._loop.call_later(timeout_s, self._watch)
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        pieces, self._pieces, self._queued = self._pieces, [], 0
        if not self._reading and not self.closed:
            self._reading = True
            self._loop.add_reader(self._fd, self._readable)
        if not pieces and self._error is not None:
            raise httpx.ReadError(str(self._error) or type(self._error).__name__)
        return pieces

    def _watch(self) -> None:
        """The read timeout: fires at most once per timeout period, whatever the number of reads."""
        self._watchdog = None
        if self._waiter is None or self._timeout_s is None:
            return
        quiet_s = (perf_counter_ns() - self._quiet_since_ns) / 1e9
        if quiet_s >= self._timeout_s:
            self._wake(httpx.ReadTimeout(f"no byte for {self._timeout_s} s"))
        else:
            self._watchdog = self._loop.call_later(self._timeout_s - quiet_s, self._watch)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if not self.closed:
            self.closed = True
            if self._reading:
                self._loop.remove_reader(self._fd)
            if self._out:
                self._loop.remove_writer(self._fd)
                self._out.clear()
            self._sock.close()
        self._wake(None)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def unread(self, pieces: list[Piece]) -> None:
        """Put back pieces that belong to the next read (the body after the head)."""
        self._pieces[:0] = pieces


def arrival_clock() -> str:
    """What stamps arrivals on this machine: "kernel" (the receive time of the bytes) or "read" (when
    read)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        return "kernel" if _enable_kernel_stamps(probe) else "read"
    finally:
        probe.close()


def _enable_kernel_stamps(sock: socket.socket) -> bool:
    if _SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True
