"""What a run's tokens cost: the price per GPU-hour a run uses, and cost per million tokens from it."""

from __future__ import annotations

from ..config import DEFAULT_PRICE_PER_GPU_HOUR
from ..run_files import Manifest


def cost_per_million(price_per_gpu_hour: float, gpus: int, seconds: float, tokens: float) -> float | None:
    """Cost per million tokens = price per GPU-hour x GPUs x hours / (tokens / 1e6)."""
    if gpus <= 0 or tokens <= 0 or seconds <= 0:
        return None
    return price_per_gpu_hour * gpus * (seconds / 3600) / (tokens / 1e6)


def price_of(manifest: Manifest, override: float | None = None) -> float:
    """The price every cost of a run uses: `override` (`ctxbench report --price`), else the one its manifest
    recorded (the campaign's), else the default."""
    if override is not None:
        return override
    recorded = manifest.price_per_gpu_hour
    return float(recorded) if recorded is not None else DEFAULT_PRICE_PER_GPU_HOUR
