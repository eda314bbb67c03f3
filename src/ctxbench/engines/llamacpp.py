"""llama.cpp's `llama-server`: its command, and the endpoints only it has (`/props`).

Process handling (start, ready, stop, logs) is `engines/server.py`, shared by every engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EngineNotReady
from .kinds import LLAMACPP
from .server import PORT, EngineServer, LaunchSpec


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

    def command(self, port: int | str = PORT) -> list[str]:
        command = [
            str(self.binary),
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ctx-size",
            str(self.ctx_size),
            "--parallel",
            str(self.parallel),
            "--alias",
            self.alias,
            "--metrics",
            "--slots",
        ]
        if self.threads is not None:
            command += ["--threads", str(self.threads)]
        return command + list(self.extra_args)

    def launch_spec(self) -> LaunchSpec:
        return LaunchSpec(
            engine=LLAMACPP.name,
            command=tuple(self.command()),
            env=dict(self.env),
            ready_paths=LLAMACPP.ready_paths,
            ready_timeout_s=self.ready_timeout_s,
            port=self.port,
            death_signal=LLAMACPP.death_signal,
        )


class LlamaServer(EngineServer):
    """A running llama-server. Use as a context manager, or call `start()` and `stop()`."""

    def __init__(self, config: LlamaServerConfig, log_path: Path) -> None:
        super().__init__(config.launch_spec(), log_path)
        self.config = config

    def start(self) -> LlamaServer:
        if not self.config.binary.exists():
            raise EngineNotReady(
                f"llama-server not found at {self.config.binary}; "
                "build it with `ctxbench engine build llamacpp`."
            )
        if not self.config.model.exists():
            raise EngineNotReady(f"model file not found: {self.config.model}")
        super().start()
        return self

    def __enter__(self) -> LlamaServer:
        return self.start()

    def props(self) -> dict[str, Any]:
        return dict(self.get_json("/props"))

    def slot_context_limit(self) -> int:
        """Tokens one request may hold (prompt + output): `/props` `default_generation_settings.n_ctx`."""
        return int(self.props()["default_generation_settings"]["n_ctx"])

    def version(self) -> str:
        return str(self.props().get("build_info", "unknown"))


DEFAULT_CACHE_RAM_MIB = 8192  # llama-server's `--cache-ram` default (this build's `--help`)
KV_BYTES_PER_VALUE = 2.0  # llama-server's default KV cache type, f16 (`--cache-type-k/v`)


def cache_settings(command: list[str]) -> tuple[int, float | None]:
    """From a llama-server command line: its slots and its host prompt cache in bytes (None: no limit; 0:
    none). The last of repeated flags wins, as llama-server reads them."""
    slots, cache_mib = 1, float(DEFAULT_CACHE_RAM_MIB)
    for flag, value in zip(command, command[1:], strict=False):
        if flag in ("--parallel", "-np"):
            slots = int(value)
        elif flag in ("--cache-ram", "-cram"):
            cache_mib = float(value)
    return slots, None if cache_mib < 0 else cache_mib * (1 << 20)
