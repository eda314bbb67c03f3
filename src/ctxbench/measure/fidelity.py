"""Output fidelity: two greedy answers to one prompt, compared token by token (docs/metrics.md, "Cache
fidelity").

The reference is the answer computed cold (nothing reused); the other is the same prompt served another way
(from the prefix cache, partly cached, among other requests, or cold again). Compared: the first position
whose token differs, the share of identical positions, and, over the positions before any divergence, the
largest difference of the chosen token's log-probability and of the top-k distributions (L1 over the union of
the two top-k sets, a token missing from one side counted at probability 0 there), with the top-k overlap.
The reference's smallest greedy margin (top-1 minus top-2 log-probability) says how close it came to
flipping, so a drift is read against it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..records import TokenLogprob

Verdict = Literal[
    "bitwise identical",
    "same tokens, within tolerance",
    "drifted",
    "diverged at a near tie",
    "diverged",
]


@dataclass(frozen=True)
class Comparison:
    compared: int  # positions both answers have
    first_divergence: int | None  # 0-based position of the first differing token; None: none differs
    identical_fraction: float  # positions with the same token, of `compared`
    max_logprob_diff: float | None  # chosen tokens, before the first divergence (None: nothing to compare)
    max_top_l1: float | None  # top-k distributions, before the first divergence
    top_overlap: float | None  # mean share of top-k tokens both sides list, before the first divergence
    bitwise: bool  # the same tokens and every log-probability equal, bit for bit
    verdict: Verdict
    tolerance: float
    # At the first divergence: how far below its choice the reference ranked the token taken instead (None:
    # not in its top-k, or no divergence).
    tie_gap: float | None = None
    # At the first divergence: how many of the reference's top-k the other answer also ranks, and how far the
    # log-probabilities of those moved (None: none shared): a distribution reshuffled, or a token replaced.
    divergence_shared: int | None = None
    divergence_drift: float | None = None

    @property
    def holds(self) -> bool:
        """The same tokens with the chosen tokens' log-probabilities within the tolerance, or a divergence at
        a near tie (the token taken instead was within the tolerance of the reference's choice)."""
        return self.verdict in HOLDS

    def text(self) -> str:
        if self.verdict == "diverged":
            return f"diverged at token {self.first_divergence}{self._at_divergence()}"
        if self.verdict == "diverged at a near tie":
            return (
                f"diverged at token {self.first_divergence} at a near tie (the cold answer ranked the token "
                f"taken {self.tie_gap:.2g} below its choice, within {self.tolerance:g})"
            )
        if self.verdict == "bitwise identical":
            return "bitwise identical"
        drift = f"logprob drift up to {self.max_logprob_diff:.2g}"
        if self.verdict == "drifted":
            then = (
                "" if self.first_divergence is None else f", then diverged at token {self.first_divergence}"
            )
            return f"drifted: {drift} (over the tolerance {self.tolerance:g}){then}"
        return f"same tokens, {drift}"

    def _at_divergence(self) -> str:
        if self.divergence_shared is None:
            return ""
        moved = "" if self.divergence_drift is None else f", moved up to {self.divergence_drift:.2g}"
        return f" ({self.divergence_shared} of the cold answer's top-k ranked there{moved})"


HOLDS: tuple[Verdict, ...] = ("bitwise identical", "same tokens, within tolerance", "diverged at a near tie")


def _key(token: TokenLogprob) -> tuple[int | None, str]:
    return (token.id, token.token) if token.id is not None else (None, token.token)


def _top(token: TokenLogprob) -> dict[tuple[int | None, str], float]:
    return {(i, t) if i is not None else (None, t): lp for t, i, lp in token.top}


def compare(reference: Sequence[TokenLogprob], other: Sequence[TokenLogprob], tolerance: float) -> Comparison:
    """`other` against `reference`, position by position (docs/metrics.md, "Cache fidelity")."""
    compared = min(len(reference), len(other))
    same = [_key(a) == _key(b) for a, b in zip(reference, other, strict=False)]
    first = next((i for i, s in enumerate(same) if not s), None)
    if first is None and len(reference) != len(other):
        first = compared  # one answer ends where the other goes on
    before = compared if first is None else first
    diffs = [abs(reference[i].logprob - other[i].logprob) for i in range(before)]
    l1s, overlaps = [], []
    for i in range(before):
        a, b = _top(reference[i]), _top(other[i])
        if a and b:
            union = set(a) | set(b)
            l1s.append(sum(abs(math.exp(a.get(k, -math.inf)) - math.exp(b.get(k, -math.inf))) for k in union))
            overlaps.append(len(set(a) & set(b)) / max(len(a), len(b)))
    bitwise = first is None and all(
        a.logprob == b.logprob and a.top == b.top for a, b in zip(reference, other, strict=True)
    )
    worst = max(diffs, default=None)
    gap = None
    if first is not None and first < compared:
        ranked = _top(reference[first]).get(_key(other[first]))
        # a near tie: the reference ranked the token taken within the tolerance of its choice, and gave it
        # the log-probability the other answer gives it, within the tolerance
        if ranked is not None and abs(other[first].logprob - ranked) <= tolerance:
            gap = reference[first].logprob - ranked
    shared_there, moved_there = None, None
    if first is not None and first < compared:
        a, b = _top(reference[first]), _top(other[first])
        if a and b:
            shared_there = len(set(a) & set(b))
            moved_there = max((abs(a[k] - b[k]) for k in set(a) & set(b)), default=None)
    if worst is not None and worst > tolerance:
        verdict: Verdict = "drifted"
    elif first is not None:
        verdict = "diverged at a near tie" if gap is not None and gap <= tolerance else "diverged"
    elif bitwise:
        verdict = "bitwise identical"
    else:
        verdict = "same tokens, within tolerance"
    return Comparison(
        compared=compared,
        first_divergence=first,
        identical_fraction=(sum(same) / compared) if compared else 0.0,
        max_logprob_diff=worst,
        max_top_l1=max(l1s, default=None),
        top_overlap=(sum(overlaps) / len(overlaps)) if overlaps else None,
        bitwise=bitwise,
        verdict=verdict,
        tolerance=tolerance,
        tie_gap=gap,
        divergence_shared=shared_there,
        divergence_drift=moved_there,
    )


def smallest_margin(answer: Sequence[TokenLogprob]) -> float | None:
    """The smallest top-1 minus top-2 log-probability over the answer (None: fewer than 2 alternatives)."""
    margins = [
        top[0] - top[1]
        for token in answer
        if len(top := sorted((lp for _, _, lp in token.top), reverse=True)) >= 2
    ]
    return min(margins, default=None)
