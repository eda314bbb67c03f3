"""`quality/quality.jsonl`, the quality check's results for a whole results directory: a line per scored
sample as it ends, then a summary line per run (`QualitySummary`: accuracy, n and the Wilson 95% interval,
per scoring). A run's latest summary is what the evidence, the console and the comparisons read; a torn last
line is skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ...measure import stats

QUALITY_FILE = Path("quality") / "quality.jsonl"  # under the results directory


class Accuracy(BaseModel):
    """One scoring's accuracy over the answered samples: None where none was answered (never 0/0)."""

    model_config = ConfigDict(extra="allow")
    correct: int
    accuracy: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, correct: int, answered: int) -> Accuracy:
        interval = stats.wilson(correct, answered)
        if interval is None:
            return cls(correct=correct, accuracy=None, low=None, high=None)
        return cls(correct=correct, accuracy=interval.estimate, low=interval.low, high=interval.high)


class QualitySummary(BaseModel):
    """A run's summary line: `n` answered samples, `failed` requests apart, each scoring's accuracy."""

    model_config = ConfigDict(extra="allow")
    kind: Literal["summary"] = "summary"
    deployment: str
    run_id: str
    n: int
    failed: int
    endpoint: str
    fewshot: int
    data: str
    max_tokens: int
    strict: Accuracy
    flexible: Accuracy

    def lines(self) -> list[str]:
        """Its accuracy, strict and flexible, with its Wilson interval, and its failed requests."""
        said = []
        for scoring, figures in (("strict", self.strict), ("flexible", self.flexible)):
            if figures.accuracy is None or figures.low is None or figures.high is None:
                said.append(f"{scoring}: not scored ({self.failed} request(s) failed, none answered)")
                continue
            accuracy = f"{figures.accuracy:.3f} [{figures.low:.3f}, {figures.high:.3f}]"
            said.append(f"{scoring}: {figures.correct}/{self.n} = {accuracy} (Wilson 95%)")
        return [*said, f"{self.failed} failed request(s)"]


def run_summaries(results: Path) -> dict[str, QualitySummary]:
    """Each run's latest summary line in `quality.jsonl`, by run id (a torn or foreign line is skipped)."""
    path = results / QUALITY_FILE
    latest: dict[str, QualitySummary] = {}
    if path.exists():
        for text in path.read_text().splitlines():
            try:
                line = json.loads(text)
                if isinstance(line, dict) and line.get("kind") == "summary":
                    summary = QualitySummary.model_validate(line)
                    latest[summary.run_id] = summary
            except (ValueError, ValidationError):
                continue
    return latest


def compare(a: QualitySummary, b: QualitySummary, alpha: float = 0.05) -> str:
    """Whether two deployments' flexible accuracies differ, by the two-proportion test at `alpha`; never
    "equal"."""
    ka, na, kb, nb = a.flexible.correct, a.n, b.flexible.correct, b.n
    p = stats.two_proportions(ka, na, kb, nb)
    caveats = []
    if a.endpoint != b.endpoint or a.fewshot != b.fewshot:
        caveats.append("different endpoint or few-shot count: not comparable")
    if na != nb:
        caveats.append(f"unequal sample sizes ({na} vs {nb})")
    if p is None:
        return "not established (no samples)"
    head = (
        f"established at alpha {alpha} (p = {p:.3g})"
        if p < alpha
        else f"not established at alpha {alpha} (p = {p:.3g}); this does not show they are equal"
    )
    return head + (f"; {'; '.join(caveats)}" if caveats else "")
