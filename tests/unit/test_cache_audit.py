"""The cache audit's three tests on hand-built runs (stamps in ms)."""

from __future__ import annotations

from pathlib import Path

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.records import Chunk, RequestRecord, Usage
from ctxbench.store import RunDir

MS = 1_000_000


def rec(
    request_id: str, check: str, prompt: int, cached: int | None, ttft_ms: float, **labels: str
) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        endpoint="chat",
        url="http://127.0.0.1:1/x",
        model="m",
        labels={"check": check, **labels},
        request_bytes=1,
        enqueued_ns=0,
        sent_ns=0,
        end_ns=int((ttft_ms + 50) * MS),
        chunks=(
            Chunk(arrived_ns=int(ttft_ms * MS), text="a"),
            Chunk(arrived_ns=int((ttft_ms + 50) * MS), text="b"),
        ),
        usage=Usage(prompt_tokens=prompt, completion_tokens=2, cached_tokens=cached),
    )


def run_of(tmp_path: Path, *records: RequestRecord) -> RunDir:
    run = RunDir.create(tmp_path, "r")
    for record in records:
        run.append(record)
    return run


def honest(n: int = 4) -> list[RequestRecord]:
    return [rec(f"fresh{i}", "needle", 8000, 11, 1000 + 10 * i) for i in range(n)]  # ~8000 tokens/s


def test_an_honest_run_has_no_findings(tmp_path: Path) -> None:
    audit = audit_run(run_of(tmp_path, *honest()))
    assert audit.findings == () and audit.median_prefill_tokens_per_s is not None


def test_a_reported_hit_on_a_fresh_prompt_is_found(tmp_path: Path) -> None:
    audit = audit_run(run_of(tmp_path, *honest(), rec("reused", "needle", 8000, 7990, 40)))
    assert [(f.request_id, f.kind) for f in audit.findings] == [("reused", "fresh_cache_hit")]


def test_an_unreported_hit_is_found_by_its_speed(tmp_path: Path) -> None:
    # The seed's case: a "250K" prompt back in under a second, and the server said nothing about a cache.
    audit = audit_run(run_of(tmp_path, *honest(), rec("reused", "needle", 8000, None, 40)))
    assert [(f.request_id, f.kind) for f in audit.findings] == [("reused", "too_fast")]


def test_a_conversation_may_reuse_its_own_history_but_not_more(tmp_path: Path) -> None:
    turn = {"users": "2", "user": "0"}
    own = [
        rec("t1", "ramp", 1000, 11, 100, turn="1", **turn),
        rec("t2", "ramp", 2000, 1001, 100, turn="2", **turn),
    ]
    assert audit_run(run_of(tmp_path / "a", *own)).findings == ()
    leak = [own[0], rec("t2", "ramp", 2000, 1900, 100, turn="2", **turn)]
    (finding,) = audit_run(run_of(tmp_path / "b", *leak)).findings
    assert finding.kind == "reuse_beyond_history" and finding.request_id == "t2"


def test_a_resumed_run_whose_first_fresh_prompt_met_a_cold_server_has_no_findings(tmp_path: Path) -> None:
    # After a resume the first prompt finds nothing cached and the rest find the chat template (30 tokens
    # here, as SmolLM2's system prompt gives): held to the smallest reported, all were "hits" (issue 39).
    resumed = [
        rec(f"fresh{i}-a2", "needle", 8000, 0 if i == 0 else 30, 1000 + 10 * i, template_tokens="28")
        for i in range(4)
    ]
    assert audit_run(run_of(tmp_path, *resumed)).findings == ()
    unlabelled = [rec(r.request_id, "needle", 8000, r.usage.cached_tokens, 1000) for r in resumed]  # type: ignore[union-attr]
    old = audit_run(run_of(tmp_path / "old", *unlabelled)).findings
    assert [f.kind for f in old] == ["fresh_cache_hit"] * 3  # what a run without the label still gets
