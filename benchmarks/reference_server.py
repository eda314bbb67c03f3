"""A reference target with ground truth: a fast loopback OpenAI-compatible streaming server.

It streams `max_tokens` tokens per request at `--rate` tokens/s per stream, `--chunk-tokens` tokens per
SSE event, after an optional silent `--prefill-delay` seconds, and stamps every event with its own send
time from the same monotonic clock ctxbench uses (`time.perf_counter_ns`, CLOCK_MONOTONIC on Linux, shared
by every process on the machine). An event's text is `<sent_ns> `; the first one's is
`<arrival_ns>:<sent_ns> ` (arrival: the request's last byte read). A client that records when each event
arrives therefore knows its own timing error exactly: arrival - sent, per event. Usage is reported
(`completion_tokens` = events x chunk tokens), so tools that count with the server's usage agree.

One asyncio process, one global ticker that writes every due event of every stream (not a timer per
stream), HTTP/1.1 with `Connection: close`. Loopback only. Also serves `/health`, `/v1/models`,
`/tokenize` (words) and `/metrics` (events and bytes sent). `--log PATH` writes a line per request:
`{"arrival_ns", "first_sent_ns", "last_sent_ns", "events"}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

Clock = time.perf_counter_ns


@dataclass
class Stream:
    writer: asyncio.StreamWriter
    events_left: int
    chunk_tokens: int
    interval_ns: int
    next_ns: int
    arrival_ns: int
    chat: bool
    model: str
    usage: bool
    template: tuple[bytes, bytes] = (b"", b"")
    sent: list[int] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class ReferenceServer:
    def __init__(
        self, rate: float, chunk_tokens: int, prefill_delay_s: float, tick_s: float, log: Path | None
    ) -> None:
        self.rate = rate
        self.chunk_tokens = chunk_tokens
        self.prefill_delay_ns = int(prefill_delay_s * 1e9)
        self.tick_s = tick_s
        self.log = log.open("a", buffering=1) if log else None  # a line at a time: read while running
        self.streams: list[Stream] = []
        self.events_sent = 0
        self.bytes_sent = 0

    async def ticker(self) -> None:
        while True:
            now = Clock()
            still = []
            for stream in self.streams:
                while stream.events_left and stream.next_ns <= now:
                    self._send(stream)
                    stream.next_ns += stream.interval_ns
                if stream.events_left:
                    still.append(stream)
                else:
                    self._finish(stream)
            self.streams = still
            await asyncio.sleep(self.tick_s)

    def _send(self, stream: Stream) -> None:
        sent = Clock()
        text = f"{stream.arrival_ns}:{sent} " if not stream.sent else f"{sent} "
        # The text is digits, ':' and a space: no JSON escaping, so the event is its template around the text.
        data = stream.template[0] + text.encode() + stream.template[1]
        stream.writer.write(data)
        stream.sent.append(sent)
        stream.events_left -= 1
        self.events_sent += 1
        self.bytes_sent += len(data)

    def _finish(self, stream: Stream) -> None:
        tokens = len(stream.sent) * stream.chunk_tokens
        if stream.usage:
            end = {
                "choices": [],
                "model": stream.model,
                "usage": {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1},
            }
            stream.writer.write(b"data: " + json.dumps(end).encode() + b"\n\n")
        stream.writer.write(b"data: [DONE]\n\n")
        if self.log:
            self.log.write(
                json.dumps(
                    {
                        "arrival_ns": stream.arrival_ns,
                        "first_sent_ns": stream.sent[0],
                        "last_sent_ns": stream.sent[-1],
                        "events": len(stream.sent),
                    }
                )
                + "\n"
            )
        stream.done.set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            arrival = Clock()
            await self.route(method, path.split("?")[0], body, arrival, writer)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            try:
                await writer.drain()
                writer.close()
            except ConnectionError:
                pass

    def _reply(
        self, writer: asyncio.StreamWriter, status: str, payload: object, kind: str = "application/json"
    ) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + data
        )

    async def route(
        self, method: str, path: str, body: bytes, arrival: int, writer: asyncio.StreamWriter
    ) -> None:
        if method == "GET" and path in ("/health", "/v1/health"):
            self._reply(writer, "200 OK", {"status": "ok"})
        elif method == "GET" and path == "/v1/models":
            self._reply(
                writer,
                "200 OK",
                {
                    "object": "list",
                    "data": [{"id": "reference", "object": "model", "max_model_len": 1 << 24}],
                },
            )
        elif method == "GET" and path == "/metrics":
            text = (
                "# TYPE reference:events_sent_total counter\nreference:events_sent_total "
                f"{self.events_sent}\n"
                f"# TYPE reference:bytes_sent_total counter\nreference:bytes_sent_total {self.bytes_sent}\n"
            )
            self._reply(writer, "200 OK", text.encode(), "text/plain; version=0.0.4")
        elif method == "POST" and path == "/tokenize":
            request = json.loads(body or b"{}")
            words = str(request.get("prompt", request.get("content", ""))).split()
            self._reply(
                writer,
                "200 OK",
                {"tokens": list(range(len(words))), "count": len(words), "max_model_len": 1 << 24},
            )
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            await self.stream(json.loads(body), arrival, writer, chat=path.endswith("chat/completions"))
        else:
            self._reply(writer, "404 Not Found", {"error": f"no route {method} {path}"})

    async def stream(self, request: dict, arrival: int, writer: asyncio.StreamWriter, chat: bool) -> None:
        tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Connection: close\r\n\r\n"
        )
        interval = int(self.chunk_tokens / self.rate * 1e9)
        stream = Stream(
            writer,
            max(1, -(-tokens // self.chunk_tokens)),
            self.chunk_tokens,
            interval,
            arrival + self.prefill_delay_ns,
            arrival,
            chat,
            str(request.get("model", "reference")),
            bool((request.get("stream_options") or {}).get("include_usage", True)),
        )
        stream.template = _template(chat, stream.model)
        self.streams.append(stream)
        await stream.done.wait()


def _template(chat: bool, model: str) -> tuple[bytes, bytes]:
    """The bytes of an event before and after its text (built once a stream: the same JSON every event)."""
    choice = {"index": 0, "delta": {"content": "\0"}} if chat else {"index": 0, "text": "\0"}
    event = json.dumps(
        {
            "object": "chat.completion.chunk" if chat else "text_completion",
            "model": model,
            "choices": [choice],
        }
    )
    before, after = event.split('"\\u0000"')
    return b"data: " + before.encode() + b'"', b'"' + after.encode() + b"\n\n"


async def serve(port: int, server: ReferenceServer) -> None:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=4096, limit=1 << 26)
    asyncio.create_task(server.ticker())
    print(f"reference server on http://127.0.0.1:{port}", flush=True)
    async with listener:
        await listener.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--rate", type=float, default=100.0, help="tokens/s per stream")
    parser.add_argument("--chunk-tokens", type=int, default=1, help="tokens per SSE event")
    parser.add_argument(
        "--prefill-delay", type=float, default=0.0, help="silent seconds before the first event"
    )
    parser.add_argument("--tick", type=float, default=0.001, help="ticker period, seconds")
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args()
    asyncio.run(
        serve(
            args.port, ReferenceServer(args.rate, args.chunk_tokens, args.prefill_delay, args.tick, args.log)
        )
    )


if __name__ == "__main__":
    main()
