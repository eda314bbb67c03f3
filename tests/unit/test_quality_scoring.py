"""GSM8K scoring as lm-evaluation-harness does it, on recorded answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.checks.quality.data import (
    Problem,
    clean,
    flexible_answer,
    load_problems,
    prompt_text,
    split,
    strict_answer,
)
from ctxbench.checks.quality.file import Accuracy, QualitySummary, compare
from ctxbench.checks.quality.params import QualityParams
from ctxbench.errors import QualityDataError
from ctxbench.text.arithmetic import arithmetic_problems, write_problems

ANSWER = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"
)


def test_targets_and_answers_are_cleaned_like_lm_eval() -> None:
    assert Problem("1", "q", ANSWER).target == "72"
    assert clean("#### 1,234") == "1234" and clean("$18.") == "18"


@pytest.mark.parametrize(
    "response, strict, flexible",
    [
        ("She sold 72 clips.\n#### 72", "72", "72"),
        ("The answer is $1,250.", None, "1250"),
        ("First 3 + 4 = 7, so 7 apples. Then 7 * 2 = 14", None, "14"),
        (
            "#### 5 and then I kept talking about 12",
            "5",
            "12",
        ),  # strict takes `####`, flexible the last number
        ("I do not know.", None, None),
        ("The total is -3.", None, "-3"),
    ],
)
def test_strict_and_flexible_extraction(response: str, strict: str | None, flexible: str | None) -> None:
    assert strict_answer(response) == strict
    assert flexible_answer(response) == flexible


def test_few_shot_examples_are_the_files_last_problems_and_never_sampled(tmp_path: Path) -> None:
    path = write_problems(tmp_path / "test.jsonl", 30)
    problems = load_problems(tmp_path)  # a directory holding test*.jsonl works too
    shots, samples = split(problems, QualityParams(data=path, samples=10, fewshot=3))
    assert [s.id for s in shots] == ["arith-27", "arith-28", "arith-29"]
    assert len(samples) == 10 and not {s.id for s in samples} & {s.id for s in shots}
    assert split(problems, QualityParams(data=path, samples=10, fewshot=3))[1] == samples  # seeded
    prompt = prompt_text(samples[0], shots)
    assert prompt.count("Question:") == 4 and prompt.endswith("Answer:") and "#### " in prompt


def test_generated_problems_carry_correct_answers() -> None:
    for problem in arithmetic_problems(50):
        numbers = [
            int(w) for w in problem["question"].replace("$", "").replace(".", " ").split() if w.isdigit()
        ]
        start, bought, _price, given = numbers
        assert problem["answer"].endswith(f"#### {start + bought - given}")


def test_missing_or_malformed_data_says_where_to_get_gsm8k(tmp_path: Path) -> None:
    with pytest.raises(QualityDataError, match="grade-school-math"):
        load_problems(tmp_path / "absent.jsonl")
    bad = tmp_path / "test.jsonl"
    bad.write_text('{"question": "q"}\n')
    with pytest.raises(QualityDataError, match=":1: expected a JSON object with `question` and `answer`"):
        load_problems(bad)


def summary(correct: int, n: int, endpoint: str = "chat", fewshot: int = 5) -> QualitySummary:
    return QualitySummary(
        deployment="d",
        run_id="r",
        n=n,
        failed=0,
        endpoint=endpoint,
        fewshot=fewshot,
        data="test.jsonl",
        max_tokens=512,
        strict=Accuracy.of(correct, n),
        flexible=Accuracy.of(correct, n),
    )


def test_comparisons_never_call_overlapping_accuracies_equal() -> None:
    assert compare(summary(80, 100), summary(60, 100)).startswith("established at alpha 0.05")
    verdict = compare(summary(8, 10), summary(6, 10))
    assert verdict.startswith("not established") and "does not show they are equal" in verdict
    assert "unequal sample sizes (200 vs 50)" in compare(summary(150, 200), summary(30, 50))
    assert "not comparable" in compare(summary(80, 100), summary(60, 100, endpoint="completions"))


def test_a_hugging_face_cache_directory_is_read(tmp_path: Path) -> None:
    import pyarrow
    import pyarrow.ipc
    import pyarrow.parquet

    rows = arithmetic_problems(5)
    table = pyarrow.Table.from_pylist([{"question": r["question"], "answer": r["answer"]} for r in rows])
    hub = tmp_path / "hub" / "datasets--openai--gsm8k" / "snapshots" / "abc" / "main"
    hub.mkdir(parents=True)
    pyarrow.parquet.write_table(table, hub / "test-00000-of-00001.parquet")
    datasets = tmp_path / "datasets" / "openai___gsm8k" / "main" / "0.0.0" / "f00"
    datasets.mkdir(parents=True)
    with (
        (datasets / "gsm8k-test.arrow").open("wb") as sink,
        pyarrow.ipc.new_stream(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    for directory in (tmp_path / "hub", tmp_path / "datasets"):
        problems = load_problems(directory)
        assert [p.question for p in problems] == [r["question"] for r in rows]
        assert problems[0].target == rows[0]["answer"].split("#### ")[1]


def test_two_runs_are_compared_from_their_latest_summaries(tmp_path: Path) -> None:
    """`Check.comparison`: the evidence report's side-by-side row reads each run's latest summary line of
    quality.jsonl (a torn line skipped), through the check's own model."""
    from ctxbench.checks.quality import QUALITY
    from ctxbench.checks.quality.file import QUALITY_FILE

    path = tmp_path / QUALITY_FILE
    path.parent.mkdir()
    lines = [
        summary(10, 100).model_copy(update={"run_id": "a"}),
        summary(80, 100).model_copy(update={"run_id": "a"}),
    ]
    lines.append(summary(60, 100).model_copy(update={"run_id": "b"}))
    path.write_text("".join(s.model_dump_json() + "\n" for s in lines) + '{"kind": "summ')
    ((label, left, right, verdict),) = QUALITY.comparison(tmp_path, "a", "b")
    assert (label, left, right) == (
        "GSM8K correct (flexible)",
        "80/100 (chat, 5-shot)",
        "60/100 (chat, 5-shot)",
    )
    assert verdict.startswith("established at alpha 0.05")
    assert QUALITY.comparison(tmp_path, "a", "absent") == []
