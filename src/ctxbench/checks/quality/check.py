"""A GSM8K sample, scored as lm-evaluation-harness's `gsm8k` task does, with honest intervals.

Problems come from a local file (the published `test.jsonl`, or a directory holding it, e.g. a Hugging
Face datasets cache); ctxbench never downloads them. The few-shot examples are the file's last
`fewshot` problems, never sampled. Each answer is scored twice, as lm-eval reports: strict (`#### n`)
and flexible (the last number in the answer); after the same cleanup of both sides (commas, `$`, a
trailing `.`), a match is correct. Every sample is a line of `results/quality/quality.jsonl`, appended as
it ends; a summary line per run gives accuracy, n and the Wilson 95% interval.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...client.chat import ChatClient
from ...records import CacheIntent, RequestRecord
from ...render.cell import Cell
from ...render.run_read import RunRead
from ...store.run_dir import RunDir
from ..base import Check, LocalFile, RunContext
from .cell import QUALITY_COLUMNS, quality_cells
from .data import Problem, flexible_answer, load_problems, prompt_text, split, strict_answer
from .file import QUALITY_FILE, Accuracy, QualitySummary, compare, run_summaries
from .labels import QualityLabels
from .params import QualityParams


@dataclass(frozen=True)
class Scored:
    kind: str
    deployment: str
    run_id: str
    id: str
    request_id: str
    prompt_sha256: str
    endpoint: str
    fewshot: int
    target: str
    answer: str
    strict: str | None
    flexible: str | None
    correct_strict: bool | None  # None: the request failed, not a wrong answer
    correct_flexible: bool | None
    error: str | None


def score(
    problem: Problem, record: RequestRecord, prompt: str, params: QualityParams, deployment: str, run_id: str
) -> Scored:
    text = record.text
    strict, flexible = strict_answer(text), flexible_answer(text)
    failed = record.error is not None
    return Scored(
        "sample",
        deployment,
        run_id,
        problem.id,
        record.request_id,
        hashlib.sha256(prompt.encode()).hexdigest(),
        params.endpoint,
        params.fewshot,
        problem.target,
        text,
        strict,
        flexible,
        None if failed else strict == problem.target,
        None if failed else flexible == problem.target,
        None if record.error is None else f"{record.error.kind}: {record.error.message}",
    )


def summary(scored: Sequence[Scored], params: QualityParams, deployment: str, run_id: str) -> QualitySummary:
    """Accuracy over answered samples with its Wilson 95% interval, per scoring; failures counted apart."""
    answered = [s for s in scored if s.error is None]
    return QualitySummary(
        deployment=deployment,
        run_id=run_id,
        n=len(answered),
        failed=len(scored) - len(answered),
        endpoint=params.endpoint,
        fewshot=params.fewshot,
        data=str(params.data),
        max_tokens=params.max_tokens,
        strict=Accuracy.of(sum(1 for s in answered if s.correct_strict), len(answered)),
        flexible=Accuracy.of(sum(1 for s in answered if s.correct_flexible), len(answered)),
    )


def _append(path: Path, line: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


async def run_quality(
    client: ChatClient,
    params: QualityParams,
    run: RunDir,
    results: Path,
    *,
    deployment: str,
    on_sample: Callable[[Scored], None] | None = None,
) -> QualitySummary:
    """Send every sampled problem (at most `concurrency` at once), score, append; returns the summary line."""
    shots, samples = split(load_problems(params.data), params)
    out = results / QUALITY_FILE
    gate = asyncio.Semaphore(params.concurrency)
    scored: list[Scored] = []

    async def one(problem: Problem) -> None:
        prompt = prompt_text(problem, shots)
        # The problems are the data file's texts, the same every run, after the same few-shot examples; no
        # tokens are counted here: reuse declared, and not bounded.
        intent = (
            CacheIntent.reusing("shared_prefix", 0, None, f"the {params.fewshot} shots before each problem")
            if params.fewshot
            else CacheIntent.reusing("same_prompt", 0, None, "a problem of the data file, the same each run")
        )
        request_id = run.request_id(f"gsm8k-{problem.id}")
        labels = QualityLabels(problem=problem.id).written()
        async with gate:
            if params.endpoint == "chat":
                record = await client.chat(
                    [{"role": "user", "content": prompt}],
                    max_tokens=params.max_tokens,
                    request_id=request_id,
                    labels=labels,
                    extra_body={"temperature": 0.0},
                    cache=intent,
                )
            else:
                record = await client.complete(
                    prompt,
                    max_tokens=params.max_tokens,
                    request_id=request_id,
                    labels=labels,
                    extra_body={"temperature": 0.0},
                    cache=intent,
                )
        run.append(record)
        result = score(problem, record, prompt, params, deployment, run.run_id)
        _append(out, asdict(result))
        scored.append(result)
        if on_sample is not None:
            on_sample(result)

    await asyncio.gather(*(one(p) for p in samples))
    line = summary(scored, params, deployment, run.run_id)
    _append(out, line.model_dump(mode="json"))
    return line


class QualityCheck(Check[QualityParams]):
    name = "quality"
    params_type = QualityParams
    needs_limit = False

    def request_count(self, params: QualityParams) -> int:
        return params.samples

    def longest_prompt(self, params: QualityParams, limit_tokens: int) -> int | None:
        return None  # its prompts are the data set's problems

    def local_files(self, params: QualityParams) -> list[LocalFile]:
        instead = (
            "Get GSM8K's test.jsonl from https://github.com/openai/grade-school-math or the Hugging Face "
            "dataset openai/gsm8k and give its local path (ctxbench never downloads data)."
        )
        return [LocalFile("data", params.data, instead, directory_ok=True)]  # or a datasets cache holding it

    def announce(self, params: QualityParams, ctx: RunContext) -> str | None:
        return (
            f"quality: {params.samples} GSM8K problems from {params.data}, {params.fewshot}-shot, "
            f"{params.endpoint} endpoint"
        )

    async def run(self, ctx: RunContext, params: QualityParams) -> None:
        line = await run_quality(
            ctx.client, params, ctx.run, ctx.results, deployment=ctx.deployment, on_sample=ctx.advance
        )
        for said in line.lines():
            ctx.say(said)

    columns = QUALITY_COLUMNS

    def section(self, read: RunRead) -> list[str]:
        return []  # a campaign-level table (quality.jsonl): the evidence report's column and comparisons

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        return quality_cells(results, run)

    def comparison(self, results: Path, run_a: str, run_b: str) -> list[tuple[str, str, str, str]]:
        """GSM8K accuracies of the two runs, and the two-proportion test's verdict at alpha 0.05."""
        summaries = run_summaries(results)
        if run_a not in summaries or run_b not in summaries:
            return []
        a, b = summaries[run_a], summaries[run_b]
        shown = [f"{s.flexible.correct}/{s.n} ({s.endpoint}, {s.fewshot}-shot)" for s in (a, b)]
        return [("GSM8K correct (flexible)", shown[0], shown[1], compare(a, b))]


QUALITY = QualityCheck()
