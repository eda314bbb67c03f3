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
