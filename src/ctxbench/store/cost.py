"""The price per GPU-hour a run's costs use (their formula is `plan.cost_per_million`)."""

from __future__ import annotations

from ..config.deployments import DEFAULT_PRICE_PER_GPU_HOUR
from .run_files import Manifest


def price_of(manifest: Manifest, override: float | None = None) -> float:
    """The price every cost of a run uses: `override` (`ctxbench report --price`), else the one its manifest
    recorded (the campaign's), else the default."""
    if override is not None:
        return override
    recorded = manifest.price_per_gpu_hour
    return float(recorded) if recorded is not None else DEFAULT_PRICE_PER_GPU_HOUR
