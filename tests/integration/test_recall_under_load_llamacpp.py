"""Recall under load against llama-server with the real SmolLM2 demo model: questions asked alone, then while
the level's users keep the server busy, each scored from its own answer (issue 56)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaigns import run_one

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.report.run_report import claims_summary, run_report
from ctxbench.results.evidence import collect
from ctxbench.text.haystack import Needle

pytestmark = pytest.mark.engine

CHECKS = """
[checks.throughput]
levels = [2]
prompt_tokens = 256
output_tokens = 32
requests_per_user = 1
warmup_requests = 0
ask = { length = 1024, questions = 2, max_tokens = 32 }
"""

DEMO = """
[[deployments]]
name = "smollm2"
engine = "llamacpp"
model = "ctxbench:demo"
ctx_size = 8192
parallel = 2
"""


def test_questions_are_asked_alone_then_inside_the_load_and_scored_from_their_answers(tmp_path: Path) -> None:
    run = run_one(tmp_path, CHECKS, DEMO)
    asked = json.loads((run.path / "throughput.json").read_text())["ask"]
    assert asked["users"] == 2 and asked["length"] == 1024  # the highest level: no search ran
    records = {r.request_id: r for r in run.records()}
    load = [r for r in records.values() if r.labels.get("ask") == "load"]
    assert load and asked["load_requests"] == len(load) and all(r.ok for r in load)
    assert {r.labels["user"] for r in load} == {"0", "1"}
    for phase in ("alone", "loaded"):
        score = asked[phase]
        questions = [records[i] for i in score["request_ids"]]
        assert score["asked"] == len(questions) == 2 and all(q.labels["ask"] == phase for q in questions)
        # each answer scored as the needle check scores it, from the record alone
        found = sum(Needle("", "", q.labels["expected"]).found_in(q.text) for q in questions if q.ok)
        assert score["found"] == found
        low, high = score["interval"]
        assert 0.0 <= low <= found / 2 <= high <= 1.0
        for q in questions:  # under load: another user's request in flight while it was answered
            beside = [r for r in load if r.sent_ns < q.end_ns and r.end_ns > q.sent_ns]
            assert bool(beside) == (phase == "loaded"), (q.request_id, len(beside))
    audit = audit_run(run)
    assert not audit.findings
    assert "### Recall under load" in run_report(run)
    assert any(line.startswith("recall under load: ") for line in claims_summary(run))
    (row,) = collect(tmp_path / "results")
    assert row.cell("ask").text.startswith("recall ") and "under 2 users' load" in row.cell("ask").text
