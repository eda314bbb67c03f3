"""`fidelity.json`, the cache-fidelity check's summary (check.py): per length, each path's answer against its
cold one, with what the engine reported reusing. One model, written by the check and read by the report, the
evidence cell, the console and the status rules; files from any earlier run load."""

from __future__ import annotations

from typing import Any, ClassVar

from ...measure.fidelity import HOLDS
from ...store.check_files import CheckFile, _Open


class FidelityPathResult(_Open):
    """One way of serving a prompt, compared with its cold answer (`fidelity.Comparison`'s fields)."""

    path: str  # cold (the second cold answer), warm, partial, load
    request_id: str
    reference_id: str  # the cold answer it is compared with
    cached_tokens: int | None  # what the engine reported reusing (None: not reported)
    prompt_tokens: int | None
    error: str | None = None  # the request, or its reference, failed: nothing compared
    compared: int = 0
    first_divergence: int | None = None
    identical_fraction: float | None = None
    max_logprob_diff: float | None = None
    max_top_l1: float | None = None
    top_overlap: float | None = None
    bitwise: bool = False
    verdict: str | None = None  # fidelity.Verdict; None where nothing was compared
    text: str  # what the report and the evidence cell say
    reference_text: str = ""  # the two answers, side by side where they diverged
    answer_text: str = ""

    tie_gap: float | None = (
        None  # a divergence: how far below its choice the cold answer ranked the token taken
    )

    @property
    def holds(self) -> bool:
        return self.verdict in HOLDS


class FidelityLength(_Open):
    length: int
    smallest_margin: float | None  # the cold answer's closest top-1 / top-2 call
    paths: list[FidelityPathResult]


class FidelityFile(CheckFile):
    """Cache fidelity: per length, each path's answer against its cold one."""

    FILE: ClassVar[str] = "fidelity.json"
    spec: dict[str, Any]
    lengths: list[FidelityLength]
    attempt: int = 1

    def failures(self) -> list[str]:
        """Cached paths (warm, partial) that diverged or drifted beyond the tolerance, where the engine
        answered the same prompt identically cold: "warm at 1024 tokens: diverged at token 5"."""
        out = []
        for length in self.lengths:
            by_path = {p.path: p for p in length.paths}
            cold = by_path.get("cold")
            if cold is None or not cold.bitwise:
                continue  # not deterministic cold: the other comparisons are not a verdict (a reason says so)
            out += [
                f"{p.path} at {length.length} tokens: {p.text}"
                for p in length.paths
                if p.path in ("warm", "partial", "restored") and p.verdict in ("diverged", "drifted")
            ]
        return out

    def summary(self, note: str = "") -> str:
        """The longest length's paths against their cold answers, and whether cold was deterministic (and
        `note`): the evidence cell's and the console's words."""
        longest = max(self.lengths, key=lambda length: length.length)
        parts = [f"{p.path} {p.text}" for p in longest.paths if p.path != "cold"]
        cold = next((p.text for p in longest.paths if p.path == "cold"), "not run")
        noise = "deterministic" if cold == "bitwise identical" else cold
        return f"at {longest.length} tokens: {'; '.join(parts)} (cold {noise}{note})"

    def cold_noise(self) -> list[str]:
        """Lengths whose two cold answers were not bit for bit the same."""
        return [
            f"{length.length} tokens: {p.text}"
            for length in self.lengths
            for p in length.paths
            if p.path == "cold" and p.verdict is not None and not p.bitwise
        ]
