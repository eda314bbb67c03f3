"""Campaign files: TOML, validated with pydantic, every error naming the file, the line and the key.

A campaign compares deployments (model x engine x layout x precision) on one node. The file holds the
campaign's name and price, the checks with their parameters, the deployments (each selected by its
`engine` field: `llamacpp`, `vllm`, `sglang`, or `external` for an endpoint already running), and the
pairs to compare side by side. Relative paths resolve against the directory ctxbench runs in, like
command-line arguments. `model = "ctxbench:demo"` and `"ctxbench:tiny"` name the models ctxbench makes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from .param_types import DEFAULT_READ_TIMEOUT_S, Strict, Tokens

BUILTIN_MODELS = ("ctxbench:demo", "ctxbench:tiny")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
# The price per GPU-hour when a campaign names none (ad-hoc runs too); every cost says which price it used.
DEFAULT_PRICE_PER_GPU_HOUR = 3.50


def _check_name(value: str) -> str:
    if not _NAME.match(value) or ".." in value:
        raise ValueError(
            f"{value!r} is not a usable name: use letters, digits, '.', '_' and '-' (no '/', no '..', at "
            "most 80 characters, starting with a letter or digit); it becomes a directory name"
        )
    return value


Name = Annotated[str, BeforeValidator(lambda v: _check_name(v) if isinstance(v, str) else v)]


class _Deployment(Strict):
    name: Name
    served_name: str | None = Field(None, max_length=200)
    gpus: list[Annotated[int, Field(ge=0, le=255)]] = Field(default_factory=list, max_length=256)
    replicas: int = Field(1, ge=1, le=64)
    args: list[str] = Field(default_factory=list, max_length=512)
    env: dict[str, str] = Field(default_factory=dict)
    # A Hugging Face tokenizer file or directory, or "server": count with the server's own /tokenize.
    tokenizer: Literal["server"] | Path | None = None
    ready_timeout_s: float = Field(900.0, gt=0, le=24 * 3600)
    # The longest silence accepted between two bytes of an answer before the request is recorded as a
    # `timeout` (a stream that never sends [DONE] and stays open, a server that stalls).
    read_timeout_s: float = Field(DEFAULT_READ_TIMEOUT_S, gt=0, le=24 * 3600)
    random_weights: bool = False
    note: str = Field("", max_length=2000)
    # The *name* of the environment variable holding an API key, never the key: requests send it as a
    # bearer token, a launched engine gets `--api-key`, and manifests, logs and reports never show it.
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # On a Ray cluster (`ctxbench run --ray`): custom resources the deployment's task asks for beside one GPU
    # per entry of `gpus`, e.g. {"H200" = 1} for a node of that kind (docs/distributed.md).
    ray_resources: dict[
        Annotated[str, Field(min_length=1, max_length=100)], Annotated[float, Field(gt=0)]
    ] = Field(default_factory=dict)
    checks: dict[str, dict[str, Any] | Literal[False]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _gpus_split_evenly(self) -> _Deployment:
        if self.gpus and len(self.gpus) % self.replicas:
            raise ValueError(f"{len(self.gpus)} GPUs cannot be split evenly into {self.replicas} replicas")
        if len(set(self.gpus)) != len(self.gpus):
            raise ValueError(f"gpus {self.gpus} lists a GPU twice")
        return self

    @property
    def served(self) -> str:
        return self.served_name or self.name

    def replica_gpus(self) -> list[list[int]]:
        """The GPUs of each replica: `gpus` split evenly in order (`[0,1,2,3]`, 2 replicas -> `[0,1]`,
        `[2,3]`)."""
        if not self.gpus:
            return [[] for _ in range(self.replicas)]
        size = len(self.gpus) // self.replicas
        return [self.gpus[i * size : (i + 1) * size] for i in range(self.replicas)]


class TinyModelShape(Strict):
    """The shape of `ctxbench:tiny` for one deployment (random weights, written on first use and cached by
    shape). A key left out keeps the small test model's value (engines/models.py `TinyModelSpec`)."""

    n_layer: int | None = Field(None, ge=1, le=256)
    n_embd: int | None = Field(None, ge=64, le=32768)
    n_head: int | None = Field(None, ge=1, le=512)
    n_head_kv: int | None = Field(None, ge=1, le=512)
    n_ff: int | None = Field(None, ge=1, le=262144)
    context_length: Tokens | None = None  # the GGUF's training context; give at least the slot size
    vocabulary: Literal["bpe", "sentencepiece"] | None = None  # sentencepiece: llama.cpp only

    @model_validator(mode="after")
    def _heads_divide(self) -> TinyModelShape:
        if self.n_embd is not None and self.n_head is not None and self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if self.n_head is not None and self.n_head_kv is not None and self.n_head % self.n_head_kv:
            raise ValueError(f"n_head ({self.n_head}) must be a multiple of n_head_kv ({self.n_head_kv})")
        return self


class _Launched(_Deployment):
    model: str
    tiny_model: TinyModelShape | None = None  # only with model = "ctxbench:tiny"
    # Flags ctxbench passes itself, each with the key that sets it: one in `args` too would collide.
    # (`--api-key` stays allowed: a key given there is redacted; one from `api_key_env` ctxbench passes.)
    OWN_FLAGS: ClassVar[dict[str, str]] = {"--host": "", "--port": ""}
    READS_GGUF: ClassVar[bool] = False  # the tiny model it is given is a GGUF (SentencePiece can be one)

    @field_validator("args")
    @classmethod
    def _not_ctxbench_flags(cls, value: list[str]) -> list[str]:
        for arg in value:
            flag = arg.split("=", 1)[0]
            if flag in cls.OWN_FLAGS:
                key = cls.OWN_FLAGS[flag]
                instead = f"set `{key}` instead" if key else "each replica gets 127.0.0.1 and a free port"
                raise ValueError(f"{arg!r}: ctxbench passes {flag} itself; remove it from args ({instead})")
        return value

    @model_validator(mode="after")
    def _shape_only_for_tiny(self) -> _Launched:
        if self.tiny_model is not None and self.model != "ctxbench:tiny":
            raise ValueError(
                f'tiny_model shapes the model ctxbench writes; it needs model = "ctxbench:tiny", '
                f"not {self.model!r}"
            )
        if self.tiny_model is not None and self.tiny_model.vocabulary == "sentencepiece":
            if not self.READS_GGUF:
                raise ValueError(
                    'tiny_model.vocabulary = "sentencepiece" is written as a GGUF for llama.cpp only; use '
                    '"bpe" (the default) with this engine'
                )
        return self


class LlamaCppDeployment(_Launched):
    engine: Literal["llamacpp"]
    OWN_FLAGS: ClassVar[dict[str, str]] = {
        **_Launched.OWN_FLAGS,
        **dict.fromkeys(("-m", "--model"), "model"),
        **dict.fromkeys(("-c", "--ctx-size"), "ctx_size"),
        **dict.fromkeys(("-np", "--parallel"), "parallel"),
        **dict.fromkeys(("-a", "--alias"), "served_name"),
    }
    READS_GGUF: ClassVar[bool] = True
    binary: Path | None = None  # default: the llama-server ctxbench built (`build`)
    build: Literal["cpu", "cuda"] = "cpu"
    ctx_size: Tokens = 8192
    parallel: int = Field(1, ge=1, le=1024)
    threads: int | None = Field(None, ge=1, le=4096)


class VllmDeployment(_Launched):
    engine: Literal["vllm"]
    OWN_FLAGS: ClassVar[dict[str, str]] = {
        **_Launched.OWN_FLAGS,
        "--model": "model",
        "--served-model-name": "served_name",
    }
    python: str = "python3"  # the interpreter of the environment vLLM is installed in
    compile_cache: Path | None = None  # VLLM_CACHE_ROOT: keep it between runs to compare cold and warm starts


class SglangDeployment(_Launched):
    engine: Literal["sglang"]
    OWN_FLAGS: ClassVar[dict[str, str]] = {
        **_Launched.OWN_FLAGS,
        **dict.fromkeys(("--model-path", "--model"), "model"),
        "--served-model-name": "served_name",
    }
    python: str = "python3"
    compile_cache: Path | None = None  # TORCHINDUCTOR_CACHE_DIR


class ExternalDeployment(_Deployment):
    engine: Literal["external"]
    urls: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(min_length=1, max_length=64)
    model: str | None = None
    # The context limit a request may hold, for a server that states none on /v1/models, /props or
    # /get_model_info (the capacity and needle checks need one; the others run without).
    limit_tokens: Tokens | None = None

    @model_validator(mode="after")
    def _one_replica_per_url(self) -> ExternalDeployment:
        if self.replicas not in (1, len(self.urls)):
            raise ValueError(
                f"replicas = {self.replicas} but {len(self.urls)} urls; an external deployment has "
                "one replica per url (leave replicas out)"
            )
        return self


DEPLOYMENT_TYPES = (LlamaCppDeployment, VllmDeployment, SglangDeployment, ExternalDeployment)
Deployment = Annotated[
    LlamaCppDeployment | VllmDeployment | SglangDeployment | ExternalDeployment, Field(discriminator="engine")
]
# The `engine = "..."` tag of each kind of deployment (engines/kinds.py has an `Engine` for each).
ENGINE_TAGS: tuple[str, ...] = tuple(
    get_args(kind.model_fields["engine"].annotation)[0] for kind in DEPLOYMENT_TYPES
)


class Comparison(Strict):
    """Two deployments shown side by side (variants on the same GPUs: with and without a drafter...)."""

    a: str
    b: str
    question: str = Field("", max_length=500)


class CampaignSettings(Strict):
    name: Name
    price_per_gpu_hour: float = Field(DEFAULT_PRICE_PER_GPU_HOUR, ge=0.0, le=10_000.0)
    results: Path = Path("results")
    repeats: int = Field(1, ge=1, le=100)  # runs of every deployment; 3 or more give medians with intervals
    gpu_telemetry_interval_s: float = Field(0.5, ge=0.0, le=60.0)  # NVML sampling while checks run; 0: off
