"""A deployment from a campaign file -> the exact engine commands, then running replicas.

`plan_deployment` composes each replica's command (recorded verbatim in the manifest, printed by
`--dry-run`) and environment (`CUDA_VISIBLE_DEVICES`, the compile cache); `Running` starts them,
describes them for the manifest (version, cold start, commands), scrapes `/metrics`, watches that
they stay up, and stops them all. An `external` deployment is a list of URLs already serving.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ..config.deployments import Deployment, ExternalDeployment, TinyModelShape
from ..config.param_types import DEFAULT_READ_TIMEOUT_S
from ..config.redaction import redact_command, redact_env
from ..errors import EngineNotReady
from .chat_template import served_template
from .kinds import EXTERNAL, LLAMACPP, engine
from .llamacpp import LlamaServerConfig
from .prom import parse_metrics
from .server import API_KEY, EngineServer, LaunchSpec


@dataclass(frozen=True)
class DeploymentPlan:
    """What will run: one `LaunchSpec` per replica (none for an external deployment, which has `urls`)."""

    name: str
    engine: str
    model: str
    served: str
    specs: tuple[LaunchSpec, ...] = ()
    urls: tuple[str, ...] = ()
    api_key_env: str | None = None
    compile_cache: Path | None = None
    replica_gpus: tuple[tuple[int, ...], ...] = ()
    limit_tokens: int | None = None  # an external server's limit from the campaign file (`limit_tokens`)
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S  # the deployment's `read_timeout_s`

    @property
    def gpu_count(self) -> int:
        return sum(len(g) for g in self.replica_gpus)

    @classmethod
    def llamacpp(cls, config: LlamaServerConfig, name: str, gpus: tuple[int, ...] = ()) -> DeploymentPlan:
        """One llama-server from a `LlamaServerConfig` (the demo's and the GPU validation's way in)."""
        return cls(
            name,
            LLAMACPP.name,
            str(config.model),
            config.alias,
            (config.launch_spec(),),
            replica_gpus=(gpus,),
        )

    def commands(self) -> list[str]:
        """Each replica's command line with its environment additions, as a shell would take it."""
        lines = []
        for spec in self.specs:
            env = " ".join(f"{k}={v}" for k, v in redact_env(spec.env).items())
            lines.append((env + " " if env else "") + shlex.join(redact_command(list(spec.command))))
        return lines or [f"(external) {url}" for url in self.urls]


def resolve_model(model: str, kind: str, *, write: bool = True, tiny: TinyModelShape | None = None) -> str:
    """`ctxbench:demo` / `ctxbench:tiny` (of the shape `tiny`) -> the local file or directory ctxbench made
    (the tiny model is written on first use unless `write` is false); other values as given."""
    from .models import TinyModelSpec, demo_model_path, tiny_hf_model, tiny_model, tiny_model_dir

    gguf = engine(kind).model_format == "gguf"
    if model == "ctxbench:demo":
        path = demo_model_path()
        if not gguf:
            raise EngineNotReady(
                "ctxbench:demo is a GGUF file for llama.cpp; give vLLM or SGLang a Hugging Face "
                "model directory (ctxbench:tiny writes one)."
            )
        return str(path)
    if model == "ctxbench:tiny":
        spec = TinyModelSpec(**tiny.model_dump(exclude_none=True)) if tiny else TinyModelSpec()
        if not write:
            directory = tiny_model_dir(spec)
            return str(directory / "tiny-llama.gguf" if gguf else f"{directory}-hf")
        return str(tiny_model(spec=spec).gguf if gguf else tiny_hf_model(spec))
    return str(Path(model).expanduser())


def plan_deployment(deployment: Deployment, *, resolve: bool = True) -> DeploymentPlan:
    """The commands and environment of each replica. `resolve=False` writes nothing (a dry run): the
    tiny model's path is shown where it will be written."""
    if isinstance(deployment, ExternalDeployment):
        return DeploymentPlan(
            deployment.name,
            EXTERNAL.name,
            deployment.model or deployment.served,
            deployment.served,
            urls=tuple(deployment.urls),
            api_key_env=deployment.api_key_env,
            replica_gpus=tuple(tuple(g) for g in deployment.replica_gpus()),
            limit_tokens=deployment.limit_tokens,
            read_timeout_s=deployment.read_timeout_s,
        )
    model = resolve_model(deployment.model, deployment.engine, write=resolve, tiny=deployment.tiny_model)
    kind = engine(deployment.engine)
    specs = []
    for gpus in deployment.replica_gpus():
        env = dict(deployment.env)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        if kind.command is None:  # every launched engine has one (tests/unit/test_engine_kinds.py)
            raise ValueError(f"engine {kind.name!r} has no command: ctxbench does not launch it")
        command = kind.command(deployment, model, len(gpus))
        cache = getattr(deployment, "compile_cache", None)
        if cache is not None and kind.compile_cache_env is not None:
            env[kind.compile_cache_env] = str(cache)
        if deployment.api_key_env:
            command += ["--api-key", API_KEY]
        specs.append(
            LaunchSpec(
                deployment.engine,
                tuple(command),
                env,
                kind.ready_paths,
                deployment.ready_timeout_s,
                api_key_env=deployment.api_key_env,
                death_signal=kind.death_signal,
            )
        )
    return DeploymentPlan(
        deployment.name,
        deployment.engine,
        model,
        deployment.served,
        tuple(specs),
        api_key_env=deployment.api_key_env,
        compile_cache=getattr(deployment, "compile_cache", None),
        replica_gpus=tuple(tuple(g) for g in deployment.replica_gpus()),
        read_timeout_s=deployment.read_timeout_s,
    )


def compile_cache_state(path: Path | None) -> dict[str, Any] | None:
    """Files and bytes in a compile cache: `empty` before a cold start, `populated` before a warm one."""
    if path is None:
        return None
    files = [p for p in Path(path).rglob("*") if p.is_file()] if Path(path).exists() else []
    size = sum(p.stat().st_size for p in files)
    return {"path": str(path), "files": len(files), "bytes": size, "state": "populated" if files else "empty"}


class Running:
    """The replicas of one deployment, started together and stopped together (a context manager)."""

    def __init__(self, plan: DeploymentPlan, run_path: Path) -> None:
        self.plan = plan
        self.run_path = run_path
        self.servers: list[EngineServer] = []
        self.cache_before = compile_cache_state(plan.compile_cache)

    def __enter__(self) -> Running:
        try:
            for index, spec in enumerate(self.plan.specs):
                log = self.run_path / ("server.log" if len(self.plan.specs) == 1 else f"server-{index}.log")
                self.servers.append(EngineServer(spec, log).start())
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    @property
    def base_urls(self) -> list[str]:
        return [s.base_url for s in self.servers] or [u.rstrip("/") for u in self.plan.urls]

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.plan.api_key_env) if self.plan.api_key_env else None

    @property
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def chat_template(self) -> tuple[dict[str, Any], str | None]:
        """The first replica's chat template and its text (engines/chat_template.py)."""
        command = list(self.servers[0].command) if self.servers else []
        return served_template(self.plan.engine, self.base_urls[0], command, self.plan.model, self._headers)

    def check_alive(self) -> None:
        """Raise `EngineDied` (with the log tail) if any replica has exited."""
        for server in self.servers:
            server.check_alive()

    def version(self) -> str:
        for path in engine(self.plan.engine).version_paths:
            try:
                data = httpx.get(self.base_urls[0] + path, timeout=10.0, headers=self._headers).json()
            except (httpx.HTTPError, ValueError):
                continue
            if isinstance(data, dict):
                for key in ("version", "build_info"):
                    if data.get(key):
                        return str(data[key])
        return "unknown"

    def metrics(self) -> list[dict[str, float]]:
        """Each replica's `/metrics`, parsed (empty where the server has none)."""
        scraped = []
        for url in self.base_urls:
            try:
                response = httpx.get(f"{url}/metrics", timeout=10.0, headers=self._headers)
                scraped.append(parse_metrics(response.text) if response.status_code == 200 else {})
            except (httpx.HTTPError, ValueError):
                scraped.append({})
        return scraped

    def describe(self) -> dict[str, Any]:
        """The manifest's `engine` entry: what ran, exactly, and how long it took to be ready."""
        cold = [s.ready_s for s in self.servers if s.ready_s is not None]
        return {
            "name": engine(self.plan.engine).title,
            "kind": self.plan.engine,
            "version": self.version(),
            "model": self.plan.model,
            "served_name": self.plan.served,
            "replicas": len(self.base_urls),
            "replica_gpus": [list(g) for g in self.plan.replica_gpus],
            "urls": self.base_urls,
            "command": redact_command(self.servers[0].command) if self.servers else None,
            "commands": [redact_command(s.command) for s in self.servers],
            "env": redact_env(self.plan.specs[0].env) if self.plan.specs else {},
            "cold_start_s": max(cold) if cold else None,
            "cold_start_s_by_replica": cold,
            "compile_cache_before": self.cache_before,
            "compile_cache_after": compile_cache_state(self.plan.compile_cache),
        }


def merged_samples(per_replica: list[dict[str, float]]) -> dict[str, float]:
    """Samples of all replicas added up under their own names (counters and gauges alike)."""
    merged: dict[str, float] = {}
    for samples in per_replica:
        for key, value in samples.items():
            merged[key] = merged.get(key, 0.0) + value
    return merged
