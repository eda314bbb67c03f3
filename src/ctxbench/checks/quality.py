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
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import stats
from ..chat_client import ChatClient
from ..errors import QualityDataError
from ..params import QualityParams
from ..records import CacheIntent, RequestRecord
from ..store import RunDir
from .base import Check, LocalFile, RunContext

GSM8K_SOURCES = (
    "https://github.com/openai/grade-school-math (grade_school_math/data/test.jsonl), or the "
    "Hugging Face dataset openai/gsm8k (main/test)"
)
QUALITY_FILE = Path("quality") / "quality.jsonl"
STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
_IGNORED = (re.compile(r","), re.compile(r"\$"), re.compile(r"(?s).*#### "), re.compile(r"\.$"))


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    answer: str  # the full worked answer, ending in `#### n`

    @property
    def target(self) -> str:
        return clean(self.answer)


SEED = "gsm8k"  # which problems are sampled: the same ones on every deployment


def clean(text: str) -> str:
    """lm-eval's gsm8k `regexes_to_ignore` (commas, `$`, everything up to `#### `, a trailing `.`),
    stripped."""
    for pattern in _IGNORED:
        text = pattern.sub("", text)
    return text.strip()


def strict_answer(response: str) -> str | None:
    match = STRICT.search(response)
    return clean(match.group(1)) if match else None


def flexible_answer(response: str) -> str | None:
    """The last number in the response (lm-eval's `flexible-extract`, group_select -1)."""
    matches = FLEXIBLE.findall(response)
    if not matches:
        return None
    last = matches[-1]
    return clean(last[0] or last[1])


def load_problems(path: Path) -> list[Problem]:
    """GSM8K problems from a JSONL file (`question`, `answer` lines), or a directory holding the test split:
    `test*.jsonl`, or a Hugging Face cache's `*test*.parquet` (hub cache) or `*test*.arrow` (datasets
    cache)."""
    if path.is_dir():
        found = [
            p
            for pattern in ("*.jsonl", "*.parquet", "*.arrow")
            for p in sorted(path.rglob(pattern))
            if "test" in p.name
        ]
        if not found:
            raise QualityDataError(
                f"{path}: no test split under it (test*.jsonl, *test*.parquet or *test*.arrow). "
                f"Get GSM8K's test.jsonl from {GSM8K_SOURCES} and pass the file (ctxbench never "
                "downloads data)."
            )
        path = found[0]
    if path.suffix in (".parquet", ".arrow"):
        return _arrow_problems(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise QualityDataError(
            f"{path}: cannot read it ({exc.strerror}). Get GSM8K's test.jsonl from "
            f"{GSM8K_SOURCES}; ctxbench never downloads data."
        ) from None
    problems = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            problems.append(
                Problem(str(entry.get("id", number)), str(entry["question"]), str(entry["answer"]))
            )
        except (ValueError, KeyError, TypeError):
            raise QualityDataError(
                f"{path}:{number}: expected a JSON object with `question` and `answer` "
                "(GSM8K's format, the answer ending in `#### <number>`)."
            ) from None
    if not problems:
        raise QualityDataError(f"{path}: no problems in it.")
    return problems


def _arrow_problems(path: Path) -> list[Problem]:
    try:
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise QualityDataError(
            f"{path}: reading a Hugging Face cache needs pyarrow: pip install 'ctxbench[quality]' "
            "(or give GSM8K's test.jsonl)."
        ) from None
    try:
        if path.suffix == ".parquet":
            table = pyarrow.parquet.read_table(path)
        else:
            with path.open("rb") as handle:
                table = pyarrow.ipc.open_stream(handle).read_all()
    except (OSError, pyarrow.ArrowException) as exc:
        raise QualityDataError(f"{path}: not a readable Arrow/Parquet file ({exc}).") from None
    if not {"question", "answer"} <= set(table.column_names):
        raise QualityDataError(
            f"{path}: has columns {table.column_names}; GSM8K's are `question` and `answer`."
        )
    return [
        Problem(str(i + 1), str(row["question"]), str(row["answer"]))
        for i, row in enumerate(table.to_pylist())
    ]


def split(problems: Sequence[Problem], params: QualityParams) -> tuple[list[Problem], list[Problem]]:
    """(few-shot examples: the file's last `fewshot`, samples: a seeded draw of the rest, file order kept)."""
    if params.fewshot >= len(problems):
        raise QualityDataError(
            f"{params.data}: {len(problems)} problems cannot give {params.fewshot} few-shot examples "
            "and any samples; lower the few-shot count."
        )
    shots = list(problems[len(problems) - params.fewshot :]) if params.fewshot else []
    pool = list(problems[: len(problems) - params.fewshot])
    if params.samples >= len(pool):
        return shots, pool
    chosen = sorted(random.Random(SEED).sample(range(len(pool)), params.samples))
    return shots, [pool[i] for i in chosen]


def prompt_text(problem: Problem, shots: Sequence[Problem]) -> str:
    """lm-eval's gsm8k format: `Question: ...\\nAnswer: <worked answer>` per example, then the question."""
    parts = [f"Question: {s.question}\nAnswer: {s.answer}" for s in shots]
    return "\n\n".join([*parts, f"Question: {problem.question}\nAnswer:"])


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


def summary(scored: Sequence[Scored], params: QualityParams, deployment: str, run_id: str) -> dict[str, Any]:
    """Accuracy over answered samples with its Wilson 95% interval, per scoring; failures counted apart."""
    answered = [s for s in scored if s.error is None]
    line: dict[str, Any] = {
        "kind": "summary",
        "deployment": deployment,
        "run_id": run_id,
        "n": len(answered),
        "failed": len(scored) - len(answered),
        "endpoint": params.endpoint,
        "fewshot": params.fewshot,
        "data": str(params.data),
        "max_tokens": params.max_tokens,
    }
    for name in ("strict", "flexible"):
        k = sum(1 for s in answered if getattr(s, f"correct_{name}"))
        interval = stats.wilson(k, len(answered))
        line[name] = {
            "correct": k,
            "accuracy": interval.estimate if interval else None,
            "low": interval.low if interval else None,
            "high": interval.high if interval else None,
        }
    return line


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
) -> dict[str, Any]:
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
        labels = {"check": "quality", "problem": problem.id}
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
    _append(out, line)
    return line


def run_summaries(results: Path) -> dict[str, dict[str, Any]]:
    """Each run's latest summary line in `quality.jsonl`, by run id (a torn last line is skipped)."""
    path = results / QUALITY_FILE
    latest: dict[str, dict[str, Any]] = {}
    if path.exists():
        for text in path.read_text().splitlines():
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if line.get("kind") == "summary":
                latest[line["run_id"]] = line
    return latest


def compare(a: dict[str, Any], b: dict[str, Any], scoring: str = "flexible", alpha: float = 0.05) -> str:
    """Whether two deployments' accuracies differ, by the two-proportion test at `alpha`; never "equal"."""
    ka, na, kb, nb = a[scoring]["correct"], a["n"], b[scoring]["correct"], b["n"]
    p = stats.two_proportions(ka, na, kb, nb)
    caveats = []
    if a["endpoint"] != b["endpoint"] or a["fewshot"] != b["fewshot"]:
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


def scored_lines(line: dict[str, Any]) -> list[str]:
    """A run's accuracy, strict and flexible, with its Wilson interval, and its failed requests."""
    said = []
    for scoring in ("strict", "flexible"):
        figures = line[scoring]
        if figures["accuracy"] is None:  # nothing answered: no accuracy, never 0/0
            said.append(f"{scoring}: not scored ({line['failed']} request(s) failed, none answered)")
            continue
        accuracy = f"{figures['accuracy']:.3f} [{figures['low']:.3f}, {figures['high']:.3f}]"
        said.append(f"{scoring}: {figures['correct']}/{line['n']} = {accuracy} (Wilson 95%)")
    return [*said, f"{line['failed']} failed request(s)"]


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
        for said in scored_lines(line):
            ctx.say(said)


QUALITY = QualityCheck()
