"""Open-loop load against the real llama-server: a rate it keeps up with, one that saturates it (and the
sweep stopping there), a client that fell behind named as such, and a replayed trace's shared prefixes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from campaigns import run_one, tiny_llamacpp

from ctxbench.checks.prompts import PromptMaker
from ctxbench.checks.throughput.rates import rate_summary, run_rate
from ctxbench.client.stream import Client
from ctxbench.config.load_params import ThroughputParams
from ctxbench.engines.llamacpp import LlamaServer
from ctxbench.engines.models import TinyModel
from ctxbench.measure import metrics
from ctxbench.measure.arrivals import lateness_s
from ctxbench.records import RequestRecord
from ctxbench.report.decide import readings
from ctxbench.report.run_report import claims_summary, run_report
from ctxbench.results.evidence import collect
from ctxbench.store.run_dir import RunDir
from ctxbench.text.haystack import UnitPool
from ctxbench.text.tokens import HfTokenCounter

pytestmark = pytest.mark.engine


def test_a_rate_sweep_finds_the_saturation_and_stops_there(tiny: TinyModel, tmp_path: Path) -> None:
    # 2 requests/s of 32-token replies are nothing for two slots; 8 requests due within 8 ms (1000/s) queue
    # behind them whatever one request costs on this host, so the lag grows by seconds a second.
    run = run_one(
        tmp_path,
        """
[checks.throughput]
levels = []
rates = [2, 1000, 2000]
arrival = "constant"
requests_per_rate = 8
prompt_tokens = 256
output_tokens = 32
saturation_lag_growth = 0.5
""",
        tiny_llamacpp(tiny),
    )
    data = json.loads((run.path / "throughput.json").read_text())
    low, high, skipped = data["rates"]["2"], data["rates"]["1000"], data["rates"]["2000"]
    assert low["requests"] == 8 and low["failed"] == 0 and not low["saturated"]
    assert low["realised_per_s"] == pytest.approx(2.0, rel=0.01)
    assert high["requests"] == 8 and high["failed"] == 0 and high["saturated"]
    assert high["lag_growth"] > 0.5 and high["sustained_per_s"] < 1000
    assert data["saturated_at"] == 1000 and "saturated at 1000" in skipped["skipped"]
    assert "throughput-r2" in run.completed_units() and "throughput-r1000" in run.completed_units()
    records = [r for r in run.records() if r.labels.get("mode") == "open"]
    assert len(records) == 16 and all(r.labels["rate"] in ("2", "1000") for r in records)
    # every due time is in the record: at 2/s, consecutive requests were due 0.5 s apart
    due = sorted(r.enqueued_ns for r in records if r.labels["rate"] == "2")
    assert all(abs((b - a) / 1e9 - 0.5) < 1e-3 for a, b in zip(due, due[1:], strict=False))

    report = run_report(run)
    assert "### Open loop: requests at a rate" in report and "SATURATED" in report and "kept up" in report
    (row,) = collect(tmp_path / "results")
    assert (
        row.cell("open_loop").text.startswith("kept up with 2 req/s")
        and "saturated at 1000" in row.cell("open_loop").text
    )
    # the p99 beside its 95% upper end, or why there is none (8 requests cannot bound a p99)
    assert "too few to bound (8 of 368)" in row.cell("open_loop").text
    summary = "\n".join(claims_summary(run))
    assert "open loop: 2 req/s kept up" in summary and "1000 req/s SATURATED" in summary
    assert "2000 req/s not offered" in summary
    (guide,) = [g for g in readings([row]) if g.question.startswith("Most requests a second")]
    assert guide.answer == f"tiny: {row.cell('open_loop').text}"


async def test_a_client_whose_loop_stalled_is_reported_behind(
    tiny_server: LlamaServer, tiny: TinyModel, tmp_path: Path
) -> None:
    params = ThroughputParams(
        levels=[], rates=[20], arrival="constant", requests_per_rate=20, prompt_tokens=128, output_tokens=8
    )
    counter = HfTokenCounter.from_path(tiny.tokenizer_dir)
    prompts = PromptMaker(params, UnitPool.generated(counter, units=256), counter, ("open", "behind"))
    run = RunDir.create(tmp_path, "behind")

    class StallingClient:
        """The real client, but the event loop stops for 0.3 s as the sixth request (due at 0.25 s) is sent:
        nothing is sent meanwhile, and the requests due then (one every 50 ms) go out late."""

        def __init__(self, client: Client) -> None:
            self.client, self.sent = client, 0

        async def chat(self, *args: object, **kwargs: object) -> RequestRecord:
            self.sent += 1
            if self.sent == 6:
                time.sleep(0.3)
            return await self.client.chat(*args, **kwargs)

    async with Client(tiny_server.base_url, "tiny") as client:
        stalling = StallingClient(client)
        scope = ("open", "behind")
        records = await run_rate(stalling, prompts, params, run, scope, 20, {"temperature": 0.0})
    late = {int(r.labels["index"]): lateness_s(r) for r in records}
    assert len(records) == 20 and all(r.ok for r in records)
    assert late[5] >= 0.3 and late[6] >= 0.2  # the stalled one, and the next one due during the stall
    line = rate_summary(records, params, 20, run.attempt)
    assert line["client_behind"] and line["lateness_p99_s"] > line["behind_threshold_s"]


def test_a_replayed_trace_shares_the_prefixes_its_hash_ids_imply(tiny: TinyModel, tmp_path: Path) -> None:
    from ctxbench.audits.prefix_cache import audit_run

    block = 128
    lines = [
        (0, [1, 2, 3, 4], 4 * block - 10),  # a document is read
        (500, [10, 11, 12], 3 * block - 7),  # someone else's, fresh
        (1500, [1, 2, 3, 4, 5], 5 * block - 3),  # the first conversation comes back, one block longer
        (2500, [1, 2, 3, 4, 5, 6, 7], 7 * block - 5),  # and again
    ]
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"timestamp": at, "input_length": n, "output_length": 8, "hash_ids": ids}) + "\n"
            for at, ids, n in lines
        )
    )
    run = run_one(
        tmp_path,
        f'[checks.trace]\nfile = "{trace}"\nblock_tokens = {block}\n',
        tiny_llamacpp(tiny),
    )
    data = json.loads((run.path / "trace.json").read_text())
    assert data["requests"] == 4 and data["failed"] == 0
    records = sorted((r for r in run.records() if r.labels["check"] == "trace"), key=lambda r: r.enqueued_ns)
    # the implied reuse: nothing, nothing, the first 3 whole blocks, then the 4 whole blocks request 3 sent
    assert [int(r.labels["expected_cached_tokens"]) for r in records] == [0, 0, 3 * block, 4 * block]
    assert [metrics.prompt_tokens(r) for r in records] == [n for _, _, n in lines]  # token-exact
    due = [(r.enqueued_ns - records[0].enqueued_ns) / 1e9 for r in records]
    assert due == pytest.approx([0, 0.5, 1.5, 2.5], abs=1e-3)  # sent at the trace's own times
    # Implied in the order they ran: the lead every prompt shares once a request has ended, and the blocks
    # of the requests that ended before it was sent (on an idle host each ends long before the next is due)
    lead = int(records[0].labels["lead_tokens"])

    def ended(i: int, j: int) -> bool:
        return records[i].end_ns <= records[j].sent_ns

    implied = [
        0,
        lead * ended(0, 1),
        lead * (ended(0, 2) or ended(1, 2)) + 3 * block * ended(0, 2),
        lead * any(ended(i, 3) for i in range(3)) + block * (4 if ended(2, 3) else 3 if ended(0, 3) else 0),
    ]
    assert data["expected_cached_tokens"] == sum(implied) and data["sharing_requests"] == 2
    # llama.cpp keeps a slot's prompt: the returning conversation finds its blocks in the slot it used
    assert data["sharing_served"] >= 1 and data["reported_cached_tokens"] >= 3 * block
    audit = audit_run(run)
    assert not [f for f in audit.findings if f.kind == "reuse_beyond_rule"]
    assert audit.trace_expected_tokens == sum(implied)
    report = run_report(run)
    assert "## Trace replay" in report and f"imply {sum(implied)} cached tokens" in report
    (row,) = collect(tmp_path / "results")
    assert "of implied cache hits" in row.cell("trace").text
    assert any(g.question.startswith("Serves the most of a replayed trace") for g in readings([row]))
    assert any(line.startswith("trace: 4/4 ok") for line in claims_summary(run))


RETURNING = """
[checks.returning]
conversations = 2
context = 600
follow_up_tokens = 32
filler_requests = 3
filler_tokens = 500
max_tokens = 8
"""


@pytest.mark.parametrize(
    ("args", "found", "forecast"),
    [
        ("[]", "cached", "2 restored from the host prompt cache"),  # llama-server's default --cache-ram 8192
        ('["--cache-ram", "0"]', "recomputed", "2 recomputed"),  # no host prompt cache
    ],
)
def test_returning_users_find_their_history_where_the_forecast_says(
    tiny: TinyModel, tmp_path: Path, args: str, found: str, forecast: str
) -> None:
    # Two slots, three fillers: every conversation is pushed out of its slot before it returns.
    run = run_one(tmp_path, RETURNING, tiny_llamacpp(tiny, args=args))
    data = json.loads((run.path / "returning.json").read_text())
    assert [c["verdict"] for c in data["conversations"]] == [found, found]
    # every prompt token-exact, the returns included (their history as the server holds it, plus 32)
    assert all(metrics.prompt_tokens(r) == int(r.labels["planned_tokens"]) for r in run.records())
    phases = [r.labels["phase"] for r in sorted(run.records(), key=lambda r: r.sent_ns)]
    assert phases == ["build", "immediate"] * 2 + ["filler"] * 3 + ["return", "fresh"] * 2
    immediate = [r for r in run.records() if r.labels["phase"] == "immediate"]
    # asked again at once, each conversation's history came from its slot
    assert all(
        (metrics.cached_tokens(r) or 0) >= 0.9 * int(r.labels["intended_cached_tokens"]) for r in immediate
    )
    report = run_report(run)
    assert "## Returning users" in report and forecast in report
    (row,) = collect(tmp_path / "results")
    assert row.cell("returning").text.startswith(
        f"{2 if found == 'cached' else 0}/2 found their history cached"
    )
    assert any(g.question.startswith("Keeps a returning conversation") for g in readings([row]))
    assert any(line.startswith(f"returning users: 2 {found}") for line in claims_summary(run))
