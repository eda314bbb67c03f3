"""Incremental server-sent-events decoder: bytes in, complete `data` payloads out.

Fed whatever the socket gave (any split: mid-line, mid-UTF-8 character, between CR and LF),
it yields the data of each finished event. Follows the WHATWG event-stream rules that matter
for OpenAI-compatible servers: LF, CRLF or CR line ends, `data:` with or without one space,
several `data:` lines joined by LF, comment lines (`:`) and other fields ignored, an event ends
at a blank line. A stream that ends without the final blank line still yields its last event.
"""

from __future__ import annotations

from collections.abc import Iterator


class SseDecoder:
    """Turns a byte stream into event data strings. One decoder per response."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data_lines: list[str] = []

    def feed(self, raw: bytes) -> list[str]:
        """The data of every event that `raw` completes."""
        buffer = self._buffer + raw if self._buffer else raw
        if self._data_lines or b"\r" in buffer:
            self._buffer = buffer
            return self._by_lines()
        # The usual stream: LF line ends, one `data: ` line an event. Whole events are cut at the blank
        # line; any other event is read by the general rules.
        *blocks, self._buffer = buffer.split(b"\n\n")
        events = []
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(block[6:].decode("utf-8", errors="replace"))
            else:
                rest, self._buffer = self._buffer, block + b"\n\n"
                events += self._by_lines()
                self._buffer = rest
        return events

    def _by_lines(self) -> list[str]:
        events = []
        for line in self._take_lines():
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> Iterator[str]:
        """Yield what is left at the end of the stream (an unterminated last line or event)."""
        rest, self._buffer = self._buffer, b""
        for line in rest.split(b"\r") if rest else ():
            event = self._line(line)
            if event is not None:
                yield event
        if self._data_lines:
            yield self._dispatch()

    def _take_lines(self) -> Iterator[bytes]:
        buffer = self._buffer
        start = 0
        n = len(buffer)
        while start < n:
            lf = buffer.find(b"\n", start)
            cr = buffer.find(b"\r", start, lf if lf >= 0 else n)
            if cr >= 0:
                # A CR at the very end may be the first half of CRLF: wait for the next bytes.
                if cr == n - 1:
                    break
                yield buffer[start:cr]
                start = cr + 2 if buffer[cr + 1 : cr + 2] == b"\n" else cr + 1
            elif lf >= 0:
                yield buffer[start:lf]
                start = lf + 1
            else:
                break
        self._buffer = buffer[start:]

    def _line(self, line: bytes) -> str | None:
        if not line:
            return self._dispatch() if self._data_lines else None
        if line.startswith(b":"):
            return None
        field, sep, value = line.partition(b":")
        if field != b"data":
            return None
        if sep and value.startswith(b" "):
            value = value[1:]
        self._data_lines.append(value.decode("utf-8", errors="replace"))
        return None

    def _dispatch(self) -> str:
        data = "\n".join(self._data_lines)
        self._data_lines = []
        return data
