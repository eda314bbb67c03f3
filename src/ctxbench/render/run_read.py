"""What a check's section of the run report reads (`RunRead`): the run directory, its records, its manifest
and the price to cost at. Every section takes it, so the report calls them all alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..records import RequestRecord
from ..store.run_dir import RunDir
from ..store.run_files import Manifest


@dataclass(frozen=True)
class RunRead:
    run: RunDir
    records: Sequence[RequestRecord]
    manifest: Manifest
    price_per_gpu_hour: float | None  # None: the campaign's own price (store.cost.price_of)
