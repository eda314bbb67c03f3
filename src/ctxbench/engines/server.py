"""Start, watch and stop one engine server process on 127.0.0.1, whatever the engine.

The command is composed by the engine's launcher with `{port}` where the port goes; the server runs in
its own process group (stopping it stops everything it started), dies with ctxbench even on SIGKILL
(Linux parent-death signal), and logs to a file kept with the results. Ready means the health path
answers 200 and, where given, the models path too; launch -> ready is the cold start.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from ..errors import EngineNotReady
from .commands import API_KEY, PORT
from .prom import parse_metrics

_PORT_ATTEMPTS = 3
CONSOLE_LINES = 6  # of an engine's log, shown on the console when it fails
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class LaunchSpec:
    """One engine process: its command (with `{port}`), environment additions and readiness rule."""

    engine: str  # llamacpp, vllm, sglang
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    ready_paths: tuple[str, ...] = ("/health",)
    ready_timeout_s: float = 180.0
    port: int | None = None  # None: pick a free loopback port
    api_key_env: str | None = None  # `{api_key}` in the command is this variable's value, read at launch
    death_signal: int = signal.SIGTERM  # what it gets if ctxbench dies without stopping it (kinds.Engine)

    @property
    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EngineNotReady(
                f"api_key_env names {self.api_key_env}, which is not set in the environment; "
                f"export {self.api_key_env}=... before running."
            )
        return key

    def argv(self, port: int) -> list[str]:
        key = self.api_key
        return [arg.replace(PORT, str(port)).replace(API_KEY, key or "") for arg in self.command]

    def secrets(self) -> list[str]:
        """Values that must never reach a file ctxbench writes: the API key, values after secret flags,
        secret-looking environment values."""
        from ..config.redaction import redact_command, redact_env

        argv = self.argv(0)
        hidden = [a for a, r in zip(argv, redact_command(argv), strict=True) if a != r]
        hidden += [v for k, v in self.env.items() if redact_env({k: v})[k] != v]
        found = [part.split("=", 1)[-1] for part in hidden] + (
            [self.api_key] if self.api_key_env and self.api_key else []
        )
        return [value for value in found if len(value) >= 4]


class EngineDied(EngineNotReady):
    """A server that was ready exited while a check ran; the message carries its log tail, `during` the
    check it died in (that check's result says nothing of the claim)."""

    during: str | None = None


FailureT = TypeVar("FailureT", bound=EngineNotReady)


def exit_text(code: int) -> str:
    """`exited with code 1`, or `was killed by SIGKILL` for a process a signal ended."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _die_with_parent(death_signal: int) -> Callable[[], None]:
    """For the child, before exec: ask Linux to send it `death_signal` when ctxbench dies, even by SIGKILL,
    so that no server outlives the run that started it (elsewhere this does nothing; `stop` and atexit still
    apply). Linux ties this to the thread that started the server: start servers from a thread that outlives
    them."""

    def ask() -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, death_signal)
        except (OSError, AttributeError):
            pass

    return ask


class EngineServer:
    """A running engine. Use as a context manager, or call `start()` and `stop()`."""

    def __init__(self, spec: LaunchSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.port = 0
        self.command: list[str] = []
        self.ready_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._secrets: list[str] = []

    @property
    def headers(self) -> dict[str, str]:
        key = self.spec.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> EngineServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> EngineServer:
        """Launch and wait until ready; `ready_s` is launch -> ready (the cold start)."""
        fixed = self.spec.port
        if fixed is not None and port_in_use(fixed):
            # Checked first: otherwise the other process would answer our health check.
            raise EngineNotReady(
                f"port {self.spec.port} on 127.0.0.1 is already in use by another process; "
                "choose another port, or leave the port unset and ctxbench picks a free one."
            )
        attempts = 1 if fixed is not None else _PORT_ATTEMPTS
        for attempt in range(attempts):
            self.port = fixed if fixed is not None else free_port()
            try:
                self._launch_and_wait()
                return self
            except EngineNotReady:
                # Another process may take the free port between our probe and the server's bind.
                if attempt + 1 < attempts and self._lost_port_race():
                    continue
                raise
        raise AssertionError("unreachable")

    def _lost_port_race(self) -> bool:
        tail = self.log_tail().lower()
        return any(words in tail for words in ("couldn't bind", "address already in use", "address in use"))

    def _launch_and_wait(self) -> None:
        self.command = self.spec.argv(self.port)
        self._secrets = self.spec.secrets()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        try:
            with self.log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    self.command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, **self.spec.env},
                    preexec_fn=_die_with_parent(self.spec.death_signal),
                )
        except OSError as exc:
            raise EngineNotReady(
                f"cannot start {self.command[0]!r}: {exc.strerror}. Is the engine installed, and "
                "is the path (`binary` or `python` in the campaign file) right?"
            ) from None
        atexit.register(self.stop)
        deadline = started + self.spec.ready_timeout_s
        with httpx.Client(timeout=2.0, headers=self.headers) as http:
            while time.perf_counter() < deadline:
                if self._process.poll() is not None:
                    code = self._process.returncode
                    self.stop()  # scrubs the log first: the tail below is read from it
                    raise self._failure(
                        EngineNotReady,
                        f"{self.spec.engine} {exit_text(code)} during startup. "
                        f"Command: {' '.join(self.command)}",
                    )
                if self._ready(http):
                    self.ready_s = time.perf_counter() - started
                    return
                time.sleep(0.1)
        self.stop()
        raise self._failure(
            EngineNotReady,
            f"{self.spec.engine} was not ready within {self.spec.ready_timeout_s:.0f} s; raise "
            "ready_timeout_s for large models.",
        )

    def _ready(self, http: httpx.Client) -> bool:
        for path in self.spec.ready_paths:
            try:
                if http.get(f"{self.base_url}{path}").status_code != 200:
                    return False
            except httpx.TransportError:
                return False
        return True

    @property
    def pid(self) -> int | None:
        """The engine process's id while it runs (None before `start` and after `stop`)."""
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def check_alive(self) -> None:
        """Raise `EngineDied` with the log tail when the server has exited since it was ready."""
        if self._process is not None and self._process.poll() is not None:
            raise self._failure(
                EngineDied,
                f"{self.spec.engine} at {self.base_url} {exit_text(self._process.returncode)} "
                "during the run.",
            )

    def _failure(self, kind: type[FailureT], message: str) -> FailureT:
        """`kind(message)` with the log's tail in its message and its last lines for the console."""
        tail = self.log_tail()
        error = kind(f"{message}\nLog tail ({self.log_path}):\n{tail}")
        error.engine_lines = tuple(line for line in tail.splitlines() if line.strip())[-CONSOLE_LINES:]
        return error

    def log_tail(self, lines: int = 25) -> str:
        try:
            return self._redact("\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:]))
        except OSError:
            return "(no log)"

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        return text

    def scrub_log(self) -> None:
        """Replace every secret value in the engine's log (an engine may print its arguments)."""
        if not self._secrets or not self.log_path.exists():
            return
        text = self.log_path.read_text(errors="replace")
        if any(secret in text for secret in self._secrets):
            self.log_path.write_text(self._redact(text))

    def get_json(self, path: str, timeout_s: float = 10.0) -> Any:
        with httpx.Client(timeout=timeout_s, headers=self.headers) as http:
            response = http.get(f"{self.base_url}{path}")
            response.raise_for_status()
            return response.json()

    def metrics(self) -> dict[str, float]:
        """The server's `/metrics` (Prometheus text), parsed; names keep the engine's prefix."""
        with httpx.Client(timeout=10.0, headers=self.headers) as http:
            response = http.get(f"{self.base_url}/metrics")
            response.raise_for_status()
            return parse_metrics(response.text)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGINT, then SIGTERM, then SIGKILL to the whole process group; safe to call twice."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        try:
            self._stop(process, grace_s)
        finally:
            self.scrub_log()

    def _stop(self, process: subprocess.Popen[bytes] | None, grace_s: float) -> None:
        if process is None:
            return
        if process.poll() is not None:
            # The leader is gone; workers it started (vLLM, SGLang) may not be.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
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
