"""Each engine ctxbench launches or reaches, as one object (`Engine`): what it is called, how it says it is
ready and which version it is, where its context limit is set, the names it gives its `/metrics` counters,
where its chat template can be read, and its quirks. Nothing outside `engines/` compares an engine's name;
it asks `engine(name)` instead."""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .build import LLAMACPP_SDIST_VERSION
from .commands import llamacpp_command, sglang_command, vllm_command


@dataclass(frozen=True)
class Engine:
    name: str  # `engine = "..."` in a campaign file; the manifest's `engine.kind`
    title: str  # the console's and the manifest's name for it
    launched: bool  # ctxbench starts it (False: a server someone else runs, at its URLs)
    version_paths: tuple[str, ...]  # where it states its version, tried in order
    ready_paths: tuple[str, ...]  # every one answers 200 once it serves
    model_format: Literal["gguf", "hf", "any"]  # what `ctxbench:tiny` becomes for it
    tool: str  # its name in another tool's report (llm-d's `scenario.stack[].standardized.tool`)
    # Its counters under ctxbench's common names (prom.COMMON_METRICS, docs/metrics.md), first present wins.
    metric_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    context_flag: str | None = None  # the command-line flag that sets one request's limit, where it has one
    compile_cache_env: str | None = None  # the variable that places its compile cache
    template_from_props: bool = False  # `/props` states the chat template it renders with
    template_from_command: bool = False  # the template is its `--chat-template` flag or the model's files
    template_may_fall_back: bool = False  # it may silently use a default template the model did not ship
    # The signal it gets when ctxbench dies without stopping it (SIGKILL of ctxbench: nobody is left to
    # escalate). SIGTERM lets an engine stop the workers it started (vLLM, SGLang). llama-server has none, and
    # its graceful shutdown can hang when the signal comes while a request is being decoded: under the stress
    # harness one was still serving 8 minutes after its SIGTERM and exited only at a second signal ("Received
    # second interrupt, terminating immediately"). It gets SIGKILL.
    death_signal: int = signal.SIGTERM
    source: str | None = None  # where ctxbench's own build of it comes from (the manifest's `engine.source`)
    cache_model_known: bool = False  # the planner can forecast its prefix cache (slots, --cache-ram)
    # The significant digits it prints `/metrics` values with; None: exactly (prometheus-client writes
    # Python's repr). llama-server writes doubles through a C++ stream at its default precision, 6 digits:
    # 1,050,496 tokens read `1.0505e+06`.
    counter_digits: int | None = None
    # Its command line (engines/commands.py): (deployment, model path, GPUs of a replica) -> argv, `{port}`
    # left for the server to fill. None for an engine ctxbench does not launch.
    command: Callable[[Any, str, int], list[str]] | None = None


LLAMACPP: Engine = Engine(
    name="llamacpp",
    command=llamacpp_command,
    title="llama.cpp llama-server",
    launched=True,
    version_paths=("/props",),
    ready_paths=("/health",),
    model_format="gguf",
    tool="llama.cpp",
    metric_names={
        "prompt_tokens": ("llamacpp:prompt_tokens_total",),
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
        "prefix_cache_hits": ("llamacpp:prompt_tokens_cached_total",),
        "requests_running": ("llamacpp:requests_processing",),
        "requests_waiting": ("llamacpp:requests_deferred",),
        "spec_drafts": ("llamacpp:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("llamacpp:spec_decode_num_draft_tokens_total",),
        "spec_accepted_tokens": ("llamacpp:spec_decode_num_accepted_tokens_total",),
        # llama.cpp counts only the prompt tokens it computed: its cache hits are left out
        "prompt_tokens_computed": ("llamacpp:prompt_tokens_total",),
        "cached_tokens": ("llamacpp:prompt_tokens_cached_total",),
    },
    template_from_props=True,
    template_may_fall_back=True,
    death_signal=signal.SIGKILL,
    source=f"llama-cpp-python=={LLAMACPP_SDIST_VERSION} sdist, vendor/llama.cpp",
    cache_model_known=True,
    counter_digits=6,
)

VLLM: Engine = Engine(
    name="vllm",
    command=vllm_command,
    title="vLLM",
    launched=True,
    version_paths=("/version",),
    ready_paths=("/health", "/v1/models"),
    model_format="hf",
    tool="vllm",
    metric_names={
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "requests_running": ("vllm:num_requests_running",),
        "requests_waiting": ("vllm:num_requests_waiting",),
        "preemptions": ("vllm:num_preemptions_total",),
        "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
        "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
        "requests": ("vllm:request_success_total",),
        "prompt_tokens_all": ("vllm:prompt_tokens_total",),
        "prompt_tokens_computed": ("vllm:request_prefill_kv_computed_tokens_sum",),
        "cached_tokens": ("vllm:prompt_tokens_cached_total",),
        "ttft_count": ("vllm:time_to_first_token_seconds_count",),
        "ttft_sum_s": ("vllm:time_to_first_token_seconds_sum",),
        "tpot_count": ("vllm:request_time_per_output_token_seconds_count",),
        "tpot_sum_s": ("vllm:request_time_per_output_token_seconds_sum",),
    },
    context_flag="--max-model-len",
    compile_cache_env="VLLM_CACHE_ROOT",
    template_from_command=True,
)

SGLANG: Engine = Engine(
    name="sglang",
    command=sglang_command,
    title="SGLang",
    launched=True,
    version_paths=("/get_server_info", "/server_info"),
    ready_paths=("/health", "/v1/models"),
    model_format="hf",
    tool="sglang",
    metric_names={
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
        "prefix_cache_hits": ("sglang:cached_tokens_total",),
        "kv_cache_usage": ("sglang:token_usage",),
        "requests_running": ("sglang:num_running_reqs",),
        "requests_waiting": ("sglang:num_queue_reqs",),
        "preemptions": ("sglang:num_retracted_requests_total",),
        "requests": ("sglang:num_requests_total",),
        "prompt_tokens_all": ("sglang:prompt_tokens_total",),
        "cached_tokens": ("sglang:cached_tokens_total",),
        "ttft_count": ("sglang:time_to_first_token_seconds_count",),
        "ttft_sum_s": ("sglang:time_to_first_token_seconds_sum",),
    },
    context_flag="--context-length",
    compile_cache_env="TORCHINDUCTOR_CACHE_DIR",
    template_from_command=True,
)

EXTERNAL: Engine = Engine(
    name="external",
    title="external",
    launched=False,
    version_paths=("/version", "/props", "/get_server_info"),
    ready_paths=(),
    model_format="any",
    tool="external",
    template_from_props=True,  # it may be a llama-server; any engine's counter names are tried
)

ENGINES: tuple[Engine, ...] = (LLAMACPP, VLLM, SGLANG, EXTERNAL)


def find_engine(name: str | None, title: str | None = None) -> Engine | None:
    """The engine a manifest's `engine.kind` names, else the one whose title is `title` (manifests written
    before `kind` was recorded kept only the title); None where neither matches (a hand-made manifest)."""
    return next((one for one in ENGINES if one.name == name), None) or next(
        (one for one in ENGINES if title is not None and one.title == title), None
    )


def engine(name: str) -> Engine:
    """The engine of a campaign file's `engine = name` (validated there, so always one of `ENGINES`)."""
    found = find_engine(name)
    if found is None:
        raise KeyError(f"no engine {name!r}: the engines are {', '.join(e.name for e in ENGINES)}")
    return found
