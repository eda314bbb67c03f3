"""Prometheus `/metrics` text -> flat samples, with prometheus-client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def parse_metrics(text: str) -> dict[str, float]:
    """Each sample as `name{label="v",...}` (labels sorted) -> value; `name` alone when unlabelled.

    Counters keep the `_total` suffix as the server wrote it, so names match the engine's docs.
    """
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return samples


# Common name -> the engines' own names, first present wins. Token counters count tokens on every engine.
COMMON_METRICS: dict[str, tuple[str, ...]] = {
    "prompt_tokens": (
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "llamacpp:prompt_tokens_total",
    ),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": (
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
        "sglang:cached_tokens_total",
        "llamacpp:prompt_tokens_cached_total",
    ),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "requests_running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "llamacpp:requests_processing",
    ),
    "requests_waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
    "preemptions": ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_drafts_total"),
    "spec_draft_tokens": (
        "vllm:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
    ),
    "spec_accepted_tokens": (
        "vllm:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
    ),
    # What ctxbench's records are checked against (report/agreement.py). Engines count prompt tokens two
    # ways: vLLM and SGLang every prompt token, llama.cpp only those it computed (its cache hits left out).
    "requests": ("vllm:request_success_total", "sglang:num_requests_total"),
    "prompt_tokens_all": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "prompt_tokens_computed": ("vllm:request_prefill_kv_computed_tokens_sum", "llamacpp:prompt_tokens_total"),
    "cached_tokens": (
        "vllm:prompt_tokens_cached_total",
        "sglang:cached_tokens_total",
        "llamacpp:prompt_tokens_cached_total",
    ),
    "ttft_count": ("vllm:time_to_first_token_seconds_count", "sglang:time_to_first_token_seconds_count"),
    "ttft_sum_s": ("vllm:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_sum"),
    "tpot_count": ("vllm:request_time_per_output_token_seconds_count",),
    "tpot_sum_s": ("vllm:request_time_per_output_token_seconds_sum",),
}


def common_metrics(samples: dict[str, float]) -> dict[str, float]:
    """The engine's samples under ctxbench's common names (docs/metrics.md), summed over label sets
    (vLLM labels each sample with its model and engine index). A name the engine lacks is left out."""
    by_name: dict[str, float] = {}
    for key, value in samples.items():
        name = key.split("{", 1)[0]
        by_name[name] = by_name.get(name, 0.0) + value
    common: dict[str, float] = {}
    for name, sources in COMMON_METRICS.items():
        for source in sources:
            if source in by_name:
                common[name] = by_name[source]
                break
    return common
