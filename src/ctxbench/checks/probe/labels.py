"""The probe's request labels: its phase (`sequential` or `concurrent`, `Labels.phase`) and which of its
prompts (`Labels.prompt`); nothing of its own beyond them."""

from __future__ import annotations

from ...labels import Labels


class ProbeLabels(Labels):
    check: str = "probe"
