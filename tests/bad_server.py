"""A server on 127.0.0.1 that is not an OpenAI-compatible one: every request gets the same wrong answer (404
with a JSON error, 500 with a text body, 200 with an HTML page, the connection closed unanswered), or, as
"endless", a chat stream that never ends (a token every 50 ms), or, as "no_done", a whole answer (tokens, the
finish reason, usage) and then nothing, neither [DONE] nor a close, for a minute, or, as "no_tokenize", a
chat server that answers every stream whole but has no `/tokenize` (nor any other route, 404), as an
OpenAI-compatible gateway in front of an engine would; in a thread of the test process.

`python tests/bad_server.py MODE` serves one until killed, printing its URL first (to try a command by hand).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWERS = {
    "404": (404, "application/json", b'{"error": {"message": "no such route", "code": 404}}'),
    "500": (500, "text/plain", b"upstream model worker crashed"),
    "html": (200, "text/html", b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"),
}


def _handler(mode: str) -> type[BaseHTTPRequestHandler]:
    status, content_type, body = ANSWERS.get(mode, ANSWERS["404"])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if mode == "silent":
                self.close_connection = True
                return
            if mode == "endless" and self.command == "POST":
                self._endless()
                return
            if mode == "no_done" and self.command == "POST":
                self._no_done()
                return
            if mode == "no_tokenize" and self.command == "POST" and self.path == "/v1/chat/completions":
                self._answered()
                return
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _endless(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            event = b'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\n\n'
            try:
                while True:
                    self.wfile.write(event)
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:  # the client went away
                self.close_connection = True

        def _no_done(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            events = [
                *({"choices": [{"index": 0, "delta": {"content": "x"}}]} for _ in range(3)),
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
            ]
            for event in events:
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.flush()
            time.sleep(60)  # open and silent: no [DONE], no close
            self.close_connection = True

        def _answered(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            events = [
                *({"choices": [{"index": 0, "delta": {"content": word}}]} for word in ("Paris", " is", ".")),
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
            ]
            for event in events:
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def bad_server(mode: str) -> Iterator[str]:
    """A running server answering every request as `mode` says (ANSWERS); yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(mode))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


if __name__ == "__main__":
    with bad_server(sys.argv[1]) as url:
        print(url, flush=True)
        threading.Event().wait()
