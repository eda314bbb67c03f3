"""A request's labels are written and read through one model per set of labels (ctxbench/labels.py; each
check's own in its folder's labels.py): no module reads a record's labels by their key, or writes them as a
dict display, but the module that defines them (issue 53)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ctxbench
from ctxbench.checks.capacity.labels import CapacityLabels
from ctxbench.checks.needle.labels import NeedleLabels
from ctxbench.checks.ramp.labels import RampLabels
from ctxbench.checks.sessions.labels import SessionsLabels
from ctxbench.checks.throughput.labels import ClientLabels, ThroughputLabels
from ctxbench.checks.trace.labels import TraceLabels
from ctxbench.labels import Labels
from ctxbench.records import RequestError, RequestRecord
from ctxbench.text.tasks import AnswerLabels, Question

ROOT = Path(ctxbench.__file__).parent
# records.py reads the labels every check writes (`RequestRecord.check`, ...) by labels.py's constants
DEFINING = {"labels.py", "records.py"}


def _labels_expr(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "labels") or (
        isinstance(node, ast.Attribute) and node.attr == "labels"
    )


def _reads_by_key(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):
        return _labels_expr(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return _labels_expr(node.func.value)
    if isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
        return any(_labels_expr(c) for c in node.comparators)
    return False


def _writes_a_dict(node: ast.AST) -> bool:
    if isinstance(node, ast.keyword) and node.arg == "labels":
        return isinstance(node.value, ast.Dict)
    if isinstance(node, ast.Assign) and any(_labels_expr(t) for t in node.targets):
        return isinstance(node.value, ast.Dict)
    return False


def test_no_module_but_the_one_that_defines_a_label_reads_or_writes_it_by_its_key() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in DEFINING or path.name == "labels.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if _reads_by_key(node) or _writes_a_dict(node):
                found.append(f"{relative}:{getattr(node, 'lineno', '?')}")
    assert found == [], "read or write a record's labels through its check's Labels model (labels.py)"


def test_the_scan_sees_each_way_of_reading_a_label() -> None:
    # the scan above could pass by seeing nothing: each form it must catch, caught
    for source in (
        'record.labels["turn"]',
        'record.labels.get("turn")',
        '"turn" in record.labels',
        'labels["turn"]',
        'f(labels={"check": "ramp"})',
        'record.labels = {"x": "1"}',
    ):
        assert any(_reads_by_key(n) or _writes_a_dict(n) for n in ast.walk(ast.parse(source))), source
    assert not any(_reads_by_key(n) for n in ast.walk(ast.parse("RampLabels.of(record).turn")))


@pytest.mark.parametrize(
    "labels",
    [
        NeedleLabels(length=4096, depth=0.5, planned_tokens=4090, reuse="document", task="multi_key"),
        NeedleLabels(length=1024, depth=0.25, control=True, **AnswerLabels.answer(Question("", ("4821",)))),
        RampLabels(
            users=2, user=1, turn=3, target_tokens=8000, intended_cached_tokens=5000, planned_tokens=1
        ),
        SessionsLabels(sessions=4, session=2, turn=1, intended_cached_tokens=0, trace=True, gap_s=0.25),
        ThroughputLabels(mode="open", rate=2.5, arrival="poisson", index=7, repeat=1, planned_tokens=None),
        ThroughputLabels(users=4, user=0, index=3, warmup=True, source="prose", shared_prefix_tokens=0),
        TraceLabels(mode="open", index=1, trace_line=2, whole_ids="1,2,3", lead_tokens=9, block_tokens=512),
        CapacityLabels(prompt="over_limit", planned_tokens=70_000),
    ],
)
def test_labels_read_back_as_written(labels: Labels) -> None:
    written = labels.written()
    assert all(isinstance(v, str) and v for v in written.values()), written
    assert type(labels).parse(written) == labels
    assert written["check"] == labels.check  # the check's own name, never left out


def test_labels_are_written_as_records_always_carried_them() -> None:
    # the text a record carries is the results format (docs/results-format.md): numbers as before
    assert NeedleLabels(length=4096, depth=0.5).written() == {
        "check": "needle",
        "length": "4096",
        "depth": "0.50",
    }
    assert ThroughputLabels(mode="open", rate=2.0).written() == {
        "check": "throughput",
        "mode": "open",
        "rate": "2",
    }
    assert ThroughputLabels(ask="alone", depth=0.25).written()["depth"] == "0.250"
    assert SessionsLabels(gap_s=1.23456).written()["gap_s"] == "1.235"
    assert ThroughputLabels(warmup=True).written()["warmup"] == "1"
    assert "warmup" not in ThroughputLabels(warmup=False).written()  # only a warm-up says so
    assert ClientLabels(client_process=2).written() == {"client_process": "2"}


def test_records_written_before_the_models_read_the_same() -> None:
    # measured requests carried warmup = "0", a prompt not planned planned_tokens = "", and labels another
    # layer added (the router's replica) that a check's model leaves alone
    old = {"check": "throughput", "users": "4", "warmup": "0", "planned_tokens": "", "replica": "1"}
    labels = ThroughputLabels.parse(old)
    assert (labels.users, labels.warmup, labels.planned_tokens) == (4, False, None)
    record = _record(old)
    assert not record.warmup and record.planned_tokens is None
    assert ThroughputLabels.of(record) == labels
    assert Labels.parse({"check": ""}).check == ""  # a label that may not be absent stays what it was


def test_the_capacity_prompt_over_the_limit_is_refused_by_design() -> None:
    over = _record(
        CapacityLabels(prompt="over_limit").written(), error=RequestError(kind="context_limit", message="x")
    )
    near = _record(
        CapacityLabels(prompt="near_limit").written(), error=RequestError(kind="context_limit", message="x")
    )
    assert over.rejected_as_over_limit and not over.failed_a_check
    assert not near.rejected_as_over_limit and near.failed_a_check


def _record(labels: dict[str, str], error: RequestError | None = None) -> RequestRecord:
    return RequestRecord(
        request_id="r",
        endpoint="chat",
        url="http://127.0.0.1:1/v1/chat/completions",
        model="m",
        labels=labels,
        request_bytes=1,
        enqueued_ns=0,
        sent_ns=0,
        end_ns=1,
        error=error,
    )
