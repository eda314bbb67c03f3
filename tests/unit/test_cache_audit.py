"""The cache audit's tests on hand-built runs (stamps in ms): every request held to its declared intent,
and records made before intents (version 2) held to the rules of their time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.records import CacheIntent, Chunk, RequestRecord, Usage
from ctxbench.store.run_dir import DuplicateRequestId, RunDir

MS = 1_000_000
FRESH = CacheIntent.fresh(11)


def rec(
    request_id: str,
    check: str,
    prompt: int,
    cached: int | None,
    ttft_ms: float,
    cache: CacheIntent | None = FRESH,
    sent_ms: float = 0,
    **labels: str,
) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        endpoint="chat",
        url="http://127.0.0.1:1/x",
        model="m",
        labels={"check": check, **labels},
        request_bytes=1,
        enqueued_ns=int(sent_ms * MS),
        sent_ns=int(sent_ms * MS),
        end_ns=int((sent_ms + ttft_ms + 50) * MS),
        chunks=(
            Chunk(arrived_ns=int((sent_ms + ttft_ms) * MS), text="a"),
            Chunk(arrived_ns=int((sent_ms + ttft_ms + 50) * MS), text="b"),
        ),
        usage=Usage(prompt_tokens=prompt, completion_tokens=2, cached_tokens=cached),
        cache=cache,
    )


def legacy(record: RequestRecord) -> RequestRecord:
    """The same record as a run made before cache intents wrote it."""
    return record.model_copy(update={"record_version": 2, "cache": None})


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
    assert audit.audited_requests == 4


def test_a_reported_hit_on_a_fresh_prompt_is_found(tmp_path: Path) -> None:
    audit = audit_run(run_of(tmp_path, *honest(), rec("reused", "needle", 8000, 7990, 40)))
    assert [(f.request_id, f.kind) for f in audit.findings] == [("reused", "fresh_cache_hit")]


@pytest.mark.parametrize("check", ["throughput", "returning", "ramp", "capacity"])
def test_every_check_s_fresh_prompts_are_audited_not_only_capacity_and_needle(
    tmp_path: Path, check: str
) -> None:
    # Issue 51: the many-users check's levels came back from the cache and the audit, which looked at
    # capacity and needle alone, said nothing.
    audit = audit_run(run_of(tmp_path, *honest(), rec("again", check, 256, 255, 25, users="1", user="0")))
    assert [(f.request_id, f.kind) for f in audit.findings] == [("again", "fresh_cache_hit")]


def test_an_unreported_hit_is_found_by_its_speed(tmp_path: Path) -> None:
    # The seed's case: a "250K" prompt back in under a second, and the server said nothing about a cache.
    audit = audit_run(run_of(tmp_path, *honest(), rec("reused", "needle", 8000, None, 40)))
    assert [(f.request_id, f.kind) for f in audit.findings] == [("reused", "too_fast")]


def test_host_noise_in_the_prefill_times_gives_no_too_fast_finding(tmp_path: Path) -> None:
    # A busy host slows some prefills many-fold (18-683 ms for identical prompts was seen): measured
    # against the fast end of the others, the fastest honest prompt is not "too fast"; a median would call it.
    noisy = [rec(f"n{i}", "needle", 8000, None, ms) for i, ms in enumerate([300, 350, 900, 1500, 2400, 2600])]
    assert audit_run(run_of(tmp_path, *noisy)).findings == ()


def test_declared_reuse_may_take_its_tokens_and_no_more(tmp_path: Path) -> None:
    history = CacheIntent.reusing("history", 11, 1000, "this user's turns 1-1 and their replies")
    own = [rec("t1", "ramp", 1000, 11, 100), rec("t2", "ramp", 2000, 1001, 100, cache=history)]
    assert audit_run(run_of(tmp_path / "a", *own)).findings == ()
    leak = [own[0], rec("t2", "ramp", 2000, 1900, 100, cache=history)]
    (finding,) = audit_run(run_of(tmp_path / "b", *leak)).findings
    assert finding.kind == "reuse_beyond_intent" and finding.request_id == "t2"
    assert "this user's turns 1-1 and their replies may take at most 1000" in finding.detail


def test_unbounded_reuse_is_counted_not_judged(tmp_path: Path) -> None:
    mine = CacheIntent.reusing("unbounded", 11, None, "a prompt of prompts.jsonl")
    audit = audit_run(run_of(tmp_path, rec("p", "throughput", 500, 499, 10, cache=mine)))
    assert audit.findings == () and audit.unbounded_requests == 1


def test_a_check_request_without_an_intent_is_a_finding(tmp_path: Path) -> None:
    audit = audit_run(run_of(tmp_path, *honest(), rec("bare", "throughput", 256, 11, 25, cache=None)))
    assert [(f.request_id, f.kind) for f in audit.findings] == [("bare", "undeclared")]


def test_the_store_refuses_a_request_id_twice(tmp_path: Path) -> None:
    run = run_of(tmp_path, *honest())
    with pytest.raises(DuplicateRequestId, match="fresh2"):
        run.append(honest()[2])
    # another process's handle on the same run reads the ids already written
    with pytest.raises(DuplicateRequestId, match="fresh0"):
        RunDir(run.path).append(honest()[0])


def test_a_run_with_an_id_recorded_twice_is_a_finding(tmp_path: Path) -> None:
    run = run_of(tmp_path, *honest())
    with run.requests_path.open("a") as handle:  # as the SLO search wrote it before the store refused it
        handle.write(honest()[1].model_dump_json() + "\n")
    assert [(f.request_id, f.kind) for f in audit_run(run).findings] == [("fresh1", "duplicate_request_id")]


def trace_rec(
    request_id: str, ids: str, cached: int, sent_ms: float, ttft_ms: float = 100, ok: bool = True
) -> RequestRecord:
    blocks = CacheIntent.reusing("trace_blocks", 40, 40 + 3 * 512, "the trace's blocks")
    record = rec(
        request_id,
        "trace",
        1600,
        cached,
        ttft_ms,
        cache=blocks,
        sent_ms=sent_ms,
        whole_ids=ids,
        lead_tokens="40",
        block_tokens="512",
        overhead_tokens="60",
        expected_cached_tokens="0",
        input_length="1600",
        planned_tokens="1600",
    )
    if ok:
        return record
    from ctxbench.records import RequestError

    refused = RequestError(kind="context_limit", message="over the limit")
    return record.model_copy(update={"error": refused, "chunks": (), "usage": None, "first_byte_ns": None})


def test_simultaneous_trace_requests_are_judged_by_the_order_they_ran_in(tmp_path: Path) -> None:
    # Two lines with the same timestamp share two blocks; the server finished the second first and served
    # the first from it. The trace's order alone called that a leak (issue 51); the order they ran in
    # allows it.
    first = trace_rec("trace-0", "7,8,9", 40 + 2 * 512, sent_ms=0, ttft_ms=300)
    second = trace_rec("trace-1", "7,8,10", 40, sent_ms=0, ttft_ms=50)
    audit = audit_run(run_of(tmp_path / "a", first, second))
    assert audit.findings == ()
    # a block neither shared nor sent before it ended is still a finding
    alone = trace_rec("trace-2", "5,6", 40 + 2 * 512 + 200, sent_ms=10_000)
    (finding,) = audit_run(run_of(tmp_path / "b", first, second, alone)).findings
    assert (finding.request_id, finding.kind) == ("trace-2", "reuse_beyond_rule")


def test_a_refused_predecessor_implies_no_hit_and_the_lead_is_counted(tmp_path: Path) -> None:
    refused = trace_rec("trace-0", "1,2", 0, sent_ms=0, ok=False)
    served = trace_rec("trace-1", "3,4", 0, sent_ms=0)
    later = trace_rec("trace-2", "1,2,3", 40, sent_ms=5_000)  # shares blocks only with the refused one
    follow = trace_rec("trace-3", "3,4,5", 40 + 2 * 512, sent_ms=6_000)  # shares two with trace-1
    audit = audit_run(run_of(tmp_path, refused, served, later, follow))
    # implied: trace-1 nothing (nothing ended before it), trace-2 the lead, trace-3 the lead and two blocks
    assert audit.trace_expected_tokens == 0 + 40 + (40 + 2 * 512)
    assert audit.findings == ()


def test_a_legacy_conversation_may_reuse_its_own_history_but_not_more(tmp_path: Path) -> None:
    turn = {"users": "2", "user": "0"}
    own = [
        legacy(rec("t1", "ramp", 1000, 11, 100, FRESH, 0, turn="1", **turn)),
        legacy(rec("t2", "ramp", 2000, 1001, 100, FRESH, 0, turn="2", **turn)),
    ]
    assert audit_run(run_of(tmp_path / "a", *own)).findings == ()
    leak = [own[0], legacy(rec("t2", "ramp", 2000, 1900, 100, FRESH, 0, turn="2", **turn))]
    (finding,) = audit_run(run_of(tmp_path / "b", *leak)).findings
    assert finding.kind == "reuse_beyond_history" and finding.request_id == "t2"


def test_a_resumed_run_whose_first_fresh_prompt_met_a_cold_server_has_no_findings(tmp_path: Path) -> None:
    # After a resume the first prompt finds nothing cached and the rest find the chat template (30 tokens
    # here, as SmolLM2's system prompt gives): held to the smallest reported, all were "hits" (issue 39).
    resumed = [
        legacy(rec(f"fresh{i}-a2", "needle", 8000, 0 if i == 0 else 30, 1000 + 10 * i, template_tokens="28"))
        for i in range(4)
    ]
    assert audit_run(run_of(tmp_path, *resumed)).findings == ()
    unlabelled = [
        legacy(rec(r.request_id, "needle", 8000, r.usage.cached_tokens if r.usage else None, 1000))
        for r in resumed
    ]
    old = audit_run(run_of(tmp_path / "old", *unlabelled)).findings
    assert [f.kind for f in old] == ["fresh_cache_hit"] * 3  # what a run without the label still gets


def snapshots(run: RunDir, check: str, hits_before: float, hits_after: float, attempt: int = 1) -> None:
    """The engine's `/metrics` before and after `check`, as the suite writes them to metrics.jsonl (vLLM's
    prefix-cache hit counter)."""
    with (run.path / "metrics.jsonl").open("a") as out:
        for phase, hits in (("before", hits_before), ("after", hits_after)):
            samples = {"vllm:prefix_cache_hits_total": hits, "vllm:prefix_cache_queries_total": 10 * hits}
            out.write(
                json.dumps(
                    {"check": check, "phase": phase, "attempt": attempt, "replicas": [{"samples": samples}]}
                )
                + "\n"
            )


def test_the_engine_counter_finds_a_hit_the_records_do_not_report(tmp_path: Path) -> None:
    # vLLM without --enable-prompt-tokens-details: no record says what came from the cache, and the needle
    # prompts read fast enough to pass the speed test; the engine's own counter says 7,990 tokens were reused.
    silent = [
        r.model_copy(update={"usage": Usage(prompt_tokens=8000, completion_tokens=2)}) for r in honest()
    ]
    run = run_of(tmp_path, *silent)
    snapshots(run, "needle", 100, 100 + 7990 + 4 * 11)
    audit = audit_run(run)
    assert [(f.request_id, f.kind) for f in audit.findings] == [
        ("needle (attempt 1)", "counter_beyond_intent")
    ]
    assert (
        "rose by 8034 tokens" in audit.findings[0].detail and "allowed 44 in all" in audit.findings[0].detail
    )
    (bound,) = audit.counter_bounds
    assert (bound.check, bound.engine_hits, bound.allowed, bound.requests) == ("needle", 8034, 44, 4)


def test_the_engine_counter_within_the_declared_reuse_is_no_finding(tmp_path: Path) -> None:
    silent = [
        r.model_copy(update={"usage": Usage(prompt_tokens=8000, completion_tokens=2)}) for r in honest()
    ]
    run = run_of(tmp_path, *silent)
    snapshots(run, "needle", 0, 4 * 11 + 4 * 16)  # the leads and each request's slack
    snapshots(run, "throughput-u1", 0, 10**6)  # a unit of a check: its check's window judges it
    assert audit_run(run).findings == ()


def test_a_check_with_unbounded_reuse_is_not_judged_by_the_counter(tmp_path: Path) -> None:
    probe = CacheIntent.reusing("unbounded", 11, None, "the probe's concurrent requests")
    run = run_of(tmp_path, rec("p0", "probe", 8000, None, 100, cache=probe))
    snapshots(run, "probe", 0, 7990)
    audit = audit_run(run)
    assert audit.findings == () and [b.allowed for b in audit.counter_bounds] == [None]


def test_each_attempt_is_held_to_its_own_requests(tmp_path: Path) -> None:
    first = [rec(f"n{i}", "needle", 8000, None, 1000) for i in range(2)]
    second = [rec(f"n{i}-a2", "needle", 8000, None, 1000) for i in range(2)]
    run = run_of(tmp_path, *first, *second)
    snapshots(run, "needle", 0, 22)
    snapshots(run, "needle", 22, 22 + 7990, attempt=2)
    audit = audit_run(run)
    assert [f.request_id for f in audit.findings] == ["needle (attempt 2)"]
