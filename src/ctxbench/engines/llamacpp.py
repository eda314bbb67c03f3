"""Start, probe and stop llama.cpp's `llama-server` on 127.0.0.1.

The server runs in its own process group so that stopping it stops everything it started,
and its log goes to a file that is kept with the results.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ..errors import EngineNotReady
from .prom import parse_metrics

_PORT_ATTEMPTS = 3


@dataclass(frozen=True)
class LlamaServerConfig:
    """How to launch one llama-server. `ctx_size` is the total; each of `parallel` slots gets its share."""

    binary: Path
    model: Path
    ctx_size: int = 4096
    parallel: int = 1
    threads: int | None = None
    alias: str = "ctxbench-model"
    port: int | None = None  # None: pick a free loopback port
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 180.0

    def command(self, port: int) -> list[str]:
        command = [
            str(self.binary), "--model", str(self.model), "--host", "127.0.0.1", "--port", str(port),
            "--ctx-size", str(self.ctx_size), "--parallel", str(self.parallel), "--alias", self.alias,
            "--metrics", "--slots",
        ]
        if self.threads is not None:
            command += ["--threads", str(self.threads)]
        return command + list(self.extra_args)


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when ctxbench dies, even by SIGKILL, so that no
    server outlives the run that started it (elsewhere this does nothing; `stop` and atexit still apply).
    Linux ties this to the thread that started the server: start servers from a thread that outlives them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """A running llama-server. Use as a context manager, or call `start()` and `stop()`."""

    def __init__(self, config: LlamaServerConfig, log_path: Path) -> None:
        self.config = config
        self.log_path = log_path
        self.port = 0
        self.command: list[str] = []
        self.ready_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> LlamaServer:
        """Launch and wait for `/health`; `ready_s` is launch -> ready (the cold start)."""
        if not self.config.binary.exists():
            raise EngineNotReady(
                f"llama-server not found at {self.config.binary}; build it with `ctxbench engine build llamacpp`."
            )
        if not self.config.model.exists():
            raise EngineNotReady(f"model file not found: {self.config.model}")
        attempts = 1 if self.config.port is not None else _PORT_ATTEMPTS
        for attempt in range(attempts):
            self.port = self.config.port if self.config.port is not None else free_port()
            try:
                self._launch_and_wait()
                return self
            except EngineNotReady:
                # Another process may take the free port between our probe and the server's bind.
                if attempt + 1 < attempts and "couldn't bind" in self.log_tail():
                    continue
                raise
        raise AssertionError("unreachable")

    def _launch_and_wait(self) -> None:
        self.command = self.config.command(self.port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, **self.config.env}, preexec_fn=_die_with_parent,
            )
        atexit.register(self.stop)
        deadline = started + self.config.ready_timeout_s
        with httpx.Client(timeout=2.0) as http:
            while time.perf_counter() < deadline:
                if self._process.poll() is not None:
                    code = self._process.returncode
                    self.stop()
                    raise EngineNotReady(
                        f"llama-server exited with code {code} during startup. "
                        f"Command: {' '.join(self.command)}\nLog tail ({self.log_path}):\n{self.log_tail()}"
                    )
                try:
                    if http.get(f"{self.base_url}/health").status_code == 200:
                        self.ready_s = time.perf_counter() - started
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise EngineNotReady(
            f"llama-server was not ready within {self.config.ready_timeout_s:.0f} s; raise ready_timeout_s "
            f"for large models.\nLog tail ({self.log_path}):\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def props(self) -> dict[str, Any]:
        with httpx.Client(timeout=10.0) as http:
            response = http.get(f"{self.base_url}/props")
            response.raise_for_status()
            return dict(response.json())

    def slot_context_limit(self) -> int:
        """Tokens one request may hold (prompt + output): `/props` `default_generation_settings.n_ctx`."""
        return int(self.props()["default_generation_settings"]["n_ctx"])

    def version(self) -> str:
        return str(self.props().get("build_info", "unknown"))

    def metrics(self) -> dict[str, float]:
        """The server's `/metrics` (Prometheus text), parsed; names keep the `llamacpp:` prefix."""
        with httpx.Client(timeout=10.0) as http:
            response = http.get(f"{self.base_url}/metrics")
            response.raise_for_status()
            return parse_metrics(response.text)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGINT, then SIGTERM, then SIGKILL to the whole process group; safe to call twice."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is None or process.poll() is not None:
            return
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=grace_s)
                return
            except subprocess.TimeoutExpired:
                continue
