"""The quality check's request labels: the problem asked."""

from __future__ import annotations

from ...labels import Labels


class QualityLabels(Labels):
    check: str = "quality"
    problem: str
