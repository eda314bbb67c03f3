"""Prometheus `/metrics` text -> flat samples, with prometheus-client's own parser."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from .kinds import LLAMACPP, SGLANG, VLLM


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


# ctxbench's common names (docs/metrics.md), in the order `/metrics` summaries list them. Token counters count
# tokens on every engine. What ctxbench's records are checked against (report/agreement.py): engines count
# prompt tokens two ways, vLLM and SGLang every prompt token, llama.cpp only those it computed.
COMMON_NAMES = (
    "prompt_tokens",
    "generation_tokens",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "kv_cache_usage",
    "requests_running",
    "requests_waiting",
    "preemptions",
    "spec_drafts",
    "spec_draft_tokens",
    "spec_accepted_tokens",
    "requests",
    "prompt_tokens_all",
    "prompt_tokens_computed",
    "cached_tokens",
    "ttft_count",
    "ttft_sum_s",
    "tpot_count",
    "tpot_sum_s",
)

# Common name -> every engine's own names for it (each engine's `metric_names`), first present wins: an
# external server may be any of them.
COMMON_METRICS: dict[str, tuple[str, ...]] = {
    name: tuple(source for one in (VLLM, SGLANG, LLAMACPP) for source in one.metric_names.get(name, ()))
    for name in COMMON_NAMES
}


def printed_digits(samples: dict[str, float]) -> int | None:
    """The significant digits the engine that wrote these samples prints values with
    (`Engine.counter_digits`), told by its counter names; None: exact, or no engine's names are among them."""
    names = {key.split("{", 1)[0] for key in samples}
    for one in (LLAMACPP, VLLM, SGLANG):
        if any(source in names for sources in one.metric_names.values() for source in sources):
            return one.counter_digits
    return None


def rounding_error(value: float, digits: int | None) -> float:
    """How far the true value may lie from `value` as printed with `digits` significant digits: half a unit
    of the last digit printed; 0 where printing is exact (None) or the value is a whole number of at most
    `digits` digits (printed in full)."""
    if digits is None or value == 0 or (value == int(value) and abs(value) < 10**digits):
        return 0.0
    return 0.5 * 10 ** (math.floor(math.log10(abs(value))) - digits + 1)


# Common names whose value is a share (0-1) of something each engine has its own of: over label sets (vLLM
# labels each data-parallel engine's gauge) they are averaged: two engines a quarter full are not half full.
FRACTIONS = frozenset({"kv_cache_usage"})


def common_metrics(samples: dict[str, float]) -> dict[str, float]:
    """The engine's samples under ctxbench's common names (docs/metrics.md), summed over label sets
    (vLLM labels each sample with its model and engine index), a share (`FRACTIONS`) averaged over them. A
    name the engine lacks is left out."""
    by_name: dict[str, float] = {}
    sets: dict[str, int] = {}
    for key, value in samples.items():
        name = key.split("{", 1)[0]
        by_name[name] = by_name.get(name, 0.0) + value
        sets[name] = sets.get(name, 0) + 1
    common: dict[str, float] = {}
    for name, sources in COMMON_METRICS.items():
        for source in sources:
            if source in by_name:
                common[name] = by_name[source] / sets[source] if name in FRACTIONS else by_name[source]
                break
    return common
