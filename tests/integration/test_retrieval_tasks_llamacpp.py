"""Every retrieval task against llama-server: the real demo model (SmolLM2-135M-Instruct) answers each task's
questions at a short length, every prompt is what the server counts, each answer is scored by its task's
rule, multi_depth's later questions come back from the cache without the audit calling it a leak, and the
report shows k/n [95%] per task, length and depth. The tiny random model draws a depth curve and runs a
ramp that asks a multi_key question each turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.checks.needle import NeedleParams
from ctxbench.checks.needle.check import run_needle
from ctxbench.checks.needle.file import NeedleFile, NeedleTrial
from ctxbench.checks.ramp import RampParams
from ctxbench.checks.ramp.check import run_ramp
from ctxbench.checks.ramp.table import RAMP_TABLE
from ctxbench.client.stream import Client
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel, demo_model_path
from ctxbench.report.run_report import run_report
from ctxbench.results.evidence import evidence_row
from ctxbench.store.run_dir import RunDir
from ctxbench.text.gguf_vocab import gguf_token_counter
from ctxbench.text.haystack import UnitPool
from ctxbench.text.tasks import TASKS, AnswerLabels
from ctxbench.text.tokens import HfTokenCounter

from .conftest import TINY_SLOT_CONTEXT

pytestmark = pytest.mark.engine


def _answers(trials: list[NeedleTrial]) -> str:
    """The recorded answers, for a failure message."""
    return "\n".join(
        f"{t.task} {t.length} depth {t.depth:.2f}: expected {t.expected!r}, found {t.found}, "
        f"answered {t.answer!r}" + (f" ERROR {t.error}" if t.error else "")
        for t in trials
    )


async def test_every_task_runs_on_the_demo_model_token_exact_and_scored_by_its_rule(
    demo_server: LlamaServer, tmp_path: Path
) -> None:
    pool = UnitPool.generated(gguf_token_counter(demo_model_path()), units=512)
    run = RunDir.create(tmp_path, "tasks")
    run.write_manifest({"deployment": "smollm2", "checks": ["needle"]})
    spec = NeedleParams(task=list(TASKS), lengths=[700], depths=[0.25, 0.75], max_tokens=48, control=0)
    async with Client(demo_server.base_url, "smollm2") as client:
        trials = await run_needle(client, pool, spec, run, ("test", "tasks"), 8192)
    answers = _answers(trials)
    assert [t.task for t in trials] == [task for task in TASKS for _ in range(2)], answers
    assert all(t.error is None and t.found is not None for t in trials), answers
    assert all(t.prompt_tokens == t.planned_tokens for t in trials), answers  # what the server counted
    records = {r.request_id: r for r in run.records()}
    for trial in trials:  # each answer scored again from the record alone, by the labels' question
        question = AnswerLabels.of(records[trial.request_id]).question()
        assert question is not None and question.score(records[trial.request_id].text) == trial.found, answers
    first, second = [t for t in trials if t.task == "multi_depth"]
    assert not first.reuse and second.reuse and second.prompt_tokens is not None
    assert (second.cached_tokens or 0) > 0.8 * second.prompt_tokens, answers  # the document from the cache
    assert audit_run(run).findings == (), answers  # intended reuse is not a leak
    assert sum(t.found is True for t in trials if t.task == "single") >= 1, answers  # the model can do it
    print(answers)  # what the model answered, in the test's output (-s) as in a failure message

    report = run_report(run)
    assert "Recall by task, length and depth (k/n [Wilson 95%]):" in report and "multi_depth asks" in report
    for task in TASKS:
        assert f"| {task} | all | all |" in report, report
    row = evidence_row(tmp_path, run)
    assert all(task in row.cell("retrieval").text for task in TASKS), row.cell("retrieval").text
    k = sum(t.found is True for t in trials)
    assert row.cell("retrieval").scored == (k, len(trials)), answers


async def test_a_depth_curve_is_drawn_a_line_per_length(
    tiny_server: LlamaServer, tiny: TinyModel, tmp_path: Path
) -> None:
    pool = UnitPool.generated(HfTokenCounter.from_path(tiny.tokenizer_dir), units=512)
    run = RunDir.create(tmp_path, "curve")
    run.write_manifest({"deployment": "tiny", "checks": ["needle"], "random_weights": True})
    spec = NeedleParams(lengths=[400, 900], depths="curve:4", max_tokens=4, control=0)
    async with Client(tiny_server.base_url, "tiny") as client:
        trials = await run_needle(client, pool, spec, run, ("test", "curve"), TINY_SLOT_CONTEXT)
    assert sorted({t.depth for t in trials}) == [0.0, 0.3333, 0.6667, 1.0] and len(trials) == 8
    needle = NeedleFile.load(run.path)
    assert needle is not None and needle.depth_curve
    report = run_report(run)
    assert "![recall by depth](recall-by-depth.png)" in report
    assert (run.path / "recall-by-depth.png").stat().st_size > 0 and (
        run.path / "recall-by-depth.svg"
    ).exists()


async def test_a_ramp_can_ask_a_multi_key_question_each_turn(
    tiny_server: LlamaServer, tiny: TinyModel, tmp_path: Path
) -> None:
    pool = UnitPool.generated(HfTokenCounter.from_path(tiny.tokenizer_dir), units=512)
    run = RunDir.create(tmp_path, "ramp")
    spec = RampParams(start=400, end=900, turns=2, users=[1], max_tokens=8, task="multi_key", distractors=4)
    async with Client(tiny_server.base_url, "tiny") as client:
        turns = await run_ramp(
            client, pool, spec, run, ("test", "ramp"), deployment="tiny", table=tmp_path / RAMP_TABLE
        )
    assert len(turns) == 2 and all(t.error is None and t.record is not None for t in turns)
    for turn in turns:
        assert turn.record is not None
        labels = turn.record.labels
        question = AnswerLabels.parse(labels).question()
        assert labels["task"] == "multi_key" and question is not None and len(question.forbidden) == 4
        assert question.score(turn.record.text) == turn.recall
        assert turn.record.usage is not None and turn.record.usage.prompt_tokens == int(
            labels["planned_tokens"]
        )
