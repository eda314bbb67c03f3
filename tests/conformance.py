"""The whole suite against a real engine, and the engine's own counters as the judge (issue 32).

`SUITE` is a campaign body with every check small enough for a CPU engine; `assert_agrees_with_engine`
holds a finished run to what its engine counted over each check (report/agreement.py)."""

from __future__ import annotations

from pathlib import Path

from ctxbench.measure import metrics
from ctxbench.records import RequestRecord
from ctxbench.report.agreement import Agreement, engine_agreement
from ctxbench.store.run_dir import RunDir

# A replayed trace of six requests sharing 64-token blocks (Mooncake's format), short enough for 2K slots.
TRACE = [
    {"timestamp": 0, "input_length": 300, "output_length": 8, "hash_ids": [1, 2, 3, 4]},
    {"timestamp": 200, "input_length": 400, "output_length": 8, "hash_ids": [1, 2, 3, 4, 5, 6]},
    {"timestamp": 400, "input_length": 250, "output_length": 8, "hash_ids": [7, 8, 9]},
    {"timestamp": 600, "input_length": 450, "output_length": 8, "hash_ids": [7, 8, 9, 10, 11, 12, 13]},
    {"timestamp": 800, "input_length": 300, "output_length": 8, "hash_ids": [1, 2, 3, 4, 14]},
    {"timestamp": 1000, "input_length": 200, "output_length": 8, "hash_ids": [15, 16, 17]},
]

SUITE = """
[checks.probe]
document_chars = 0
max_tokens = 8
concurrency = 2

[checks.capacity]

[checks.needle]
lengths = [384, 768]

[checks.ramp]
start = 256
end = 1024
turns = 3
users = [1, 2]
max_tokens = 24
stagger_s = 0.05

[checks.throughput]
levels = [1, 2]
prompt_tokens = 128
output_tokens = 16
requests_per_user = 2
rates = [2]
requests_per_rate = 4

[checks.trace]
file = "{trace}"
block_tokens = 64
time_scale = 0.5

[checks.returning]
conversations = 2
context = 400
follow_up_tokens = 32
filler_requests = 2
filler_tokens = 300
max_tokens = 4

[checks.sessions]
sessions = [1, 2]
system_tokens = 16
turn_tokens = 200
max_tokens = 4
turns = 3
gap_s = 0.3

[checks.fidelity]
lengths = [512]
max_tokens = 8
load_users = 2
"""


def suite(tmp_path: Path) -> str:
    import json

    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in TRACE))
    return SUITE.format(trace=trace)


# ctxbench's TTFT starts at the send; the engine's once it has parsed and tokenized the request, and the
# first token still has to come back over HTTP: the mean offset per request, measured on 2 loaded cores,
# is 2-50 ms (docs/metrics.md). Above this, the TTFT is no longer the same event the engine timed.
MAX_TTFT_OFFSET_S = 0.5


def held(record: RequestRecord) -> bool:
    """llama.cpp holds back a token that ends inside a multi-byte character and sends it with the next: a
    random model over a byte-fallback vocabulary (SentencePiece) can emit tens of byte tokens that make up a
    few characters, and its stream then has far fewer events than tokens (seen twice in ~50 runs of the
    SentencePiece suite: 24 tokens in 2 events). Such a record is rightly left out of timing
    (`metrics.implausible`), and it is the server's doing, not events the client missed: a reply with a
    non-ASCII character is taken to be that; an all-ASCII reply in few events is still flagged, text shown."""
    return bool(record.text) and not record.text.isascii()


def assert_agrees_with_engine(run: RunDir, *, reports_cached: bool, event_per_token: bool) -> list[Agreement]:
    """Every count equals the engine's over each check; TTFT count equals it and its sum is above by at most
    `MAX_TTFT_OFFSET_S` a request; cached tokens are "not reported" exactly where the server sent none; no
    record's timing is flagged; never more events than tokens (llama.cpp holds back a token that ends inside a
    multi-byte character and sends it with the next). `event_per_token`: the server streams an event a token
    (vLLM), so the events are at least three quarters of the tokens over the run (a client that dropped the
    empty events would keep about half)."""
    found = engine_agreement(run)
    checks = {a.check for a in found}
    assert {"probe", "capacity", "needle", "ramp", "throughput", "trace", "returning"} <= checks, checks
    wrong = [a for a in found if a.agrees is False]
    assert wrong == [], wrong
    by = {(a.check, a.name): a for a in found}
    for check in checks:
        cached = by.get((check, "cached_tokens"))
        if cached is not None:
            assert (cached.ctxbench is not None) == reports_cached, cached
        count, total = by.get((check, "ttft_count")), by.get((check, "ttft_sum_s"))
        if count is not None and total is not None and count.engine:
            assert total.ctxbench is not None
            offset = (total.ctxbench - total.engine) / count.engine
            assert 0 <= offset <= MAX_TTFT_OFFSET_S, (check, offset)
    records = [r for r in run.records() if r.ok]
    flagged = [
        (r.request_id, metrics.implausible(r), r.text[:60])
        for r in records
        if metrics.implausible(r) and not held(r)
    ]
    assert flagged == [], flagged
    counted = [(r, r.usage.completion_tokens) for r in records if r.usage and r.usage.completion_tokens]
    more = [(r.request_id, tokens, len(r.chunks)) for r, tokens in counted if len(r.chunks) > tokens]
    assert more == [], "never more token events than tokens"
    if event_per_token:
        # What this guards: a client that drops the empty events (as the old one did) loses about half.
        # What it must let pass: vLLM merges decode steps into one event when its API process falls behind,
        # as often as the host's load makes it, not ctxbench: 3 of 62 replies one event short beside a CPU
        # hog; 830 events for 876 tokens (5.3% merged) in the whole suite under a busy loop per core
        # (2026-12-07). Three quarters sits between the two with room on both sides.
        events, tokens = sum(len(r.chunks) for r, _ in counted), sum(t for _, t in counted)
        assert events >= 0.75 * tokens, (events, tokens)
    return found
