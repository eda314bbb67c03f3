"""The fidelity check's request labels: the prompt length and the cache path the answer came by (cold-1,
warm, cold-2, partial, partial-cold, evict, load-other)."""

from __future__ import annotations

from ...labels import Labels


class FidelityLabels(Labels):
    check: str = "fidelity"
    length: int
    path: str
