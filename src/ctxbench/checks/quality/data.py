"""GSM8K problems and their scoring, as lm-evaluation-harness's `gsm8k` task does: problems from a local file
(the published `test.jsonl`, or a directory holding it, e.g. a Hugging Face datasets cache; never downloaded),
the few-shot examples the file's last `fewshot` problems, each answer scored strict (`#### n`) and flexible
(the last number), after the same cleanup of both sides (commas, `$`, a trailing `.`)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import QualityDataError
from .params import QualityParams

GSM8K_SOURCES = (
    "https://github.com/openai/grade-school-math (grade_school_math/data/test.jsonl), or the "
    "Hugging Face dataset openai/gsm8k (main/test)"
)
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
