"""Many users, short prompts, against the real llama-server: throughput rises with users, and speculative
decoding's acceptance comes from the engine's /metrics."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from campaigns import run_one, tiny_llamacpp

from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.engines.models import TinyModel, TinyModelSpec, tiny_model
from ctxbench.measure import metrics
from ctxbench.measure.steady import steady_state
from ctxbench.report.run_report import run_report
from ctxbench.results.evidence import collect
from ctxbench.store.counters import counter_deltas
from ctxbench.store.run_dir import RunDir
from ctxbench.text.tokens import HfTokenCounter

pytestmark = pytest.mark.engine


# A tiny-model deployment for campaign files: name, gguf, tok and args to fill in.


DRAFT = '["--model-draft", "{gguf}", "--spec-type", "draft-simple"]'  # the tiny model drafts for itself

# Wide enough that four users' decode steps are real work for the server, not only its overhead.
WIDE = TinyModelSpec(n_embd=768, n_head=12, n_head_kv=4, n_layer=4, n_ff=2048)


def busy_slots_per_decode(run: RunDir, unit: str) -> float:
    """The slots llama-server's decode calls carried on average over `unit`'s window, from its own counters
    in the run's `/metrics` snapshots: `n_busy_slots_per_decode` is its busy-slot total over `n_decode_total`
    since it started, so the total before and after, differenced, over the calls between."""
    window: dict[str, dict[str, float]] = {}
    for line in (run.path / "metrics.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["check"] == unit:
            (replica,) = entry["replicas"]
            window[entry["phase"]] = replica["samples"]

    def totals(samples: dict[str, float]) -> tuple[float, float]:
        calls = samples["llamacpp:n_decode_total"]
        return samples["llamacpp:n_busy_slots_per_decode"] * calls, calls

    (busy_before, calls_before), (busy_after, calls_after) = totals(window["before"]), totals(window["after"])
    assert calls_after > calls_before, window
    return (busy_after - busy_before) / (calls_after - calls_before)


def test_four_users_are_decoded_together_in_four_slots(tmp_path: Path) -> None:
    tiny = tiny_model(spec=WIDE)
    run = run_one(
        tmp_path,
        """
[checks.throughput]
levels = [1, 4]
prompt_tokens = 256
output_tokens = 64
requests_per_user = 3
source = "code"
shared_prefix_tokens = 64
ttft_slo_s = 30.0
""",
        f"""
[[deployments]]
name = "tiny-4-slots"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
ctx_size = 4096
parallel = 4
random_weights = true
""",
    )
    levels = json.loads((run.path / "throughput.json").read_text())["levels"]
    one, four = levels["1"], levels["4"]
    assert one["requests"] == 3 and four["requests"] == 12 and one["failed"] == four["failed"] == 0
    assert four["output_tokens"] == 12 * 64  # ignore_eos: every request wrote its budget
    records = list(run.records())
    # Which level was faster is a measurement (benchmarks/many_users.py), not a test: on a busy 2-core host
    # four users can be slower in aggregate than one (seen: 166 against 244 output tokens/s under load).
    level_four = [r for r in records if r.request_id in set(four["request_ids"])]
    # The engine says it decoded the users together: its calls carried more than one slot on average over
    # the level (one user alone is 1.0), never more than its four (what the client saw at once is timing).
    one_slot, shared = (
        busy_slots_per_decode(run, "throughput-u1"),
        busy_slots_per_decode(run, "throughput-u4"),
    )
    print(f"slots a decode call carried: {one_slot:.2f} with one user, {shared:.2f} with four")
    assert one_slot == pytest.approx(1.0, abs=0.01) and 1.5 < shared <= 4.0 + 1e-3
    warmups = [r for r in records if r.warmup]
    assert len(warmups) == 1 + 4 and not set(r.request_id for r in warmups) & set(four["request_ids"])
    measured = [r for r in records if not r.warmup]
    assert all(metrics.prompt_tokens(r) == int(r.labels["planned_tokens"]) for r in measured)  # token-exact
    # Steady state: all four in flight, ramp-up and drain cut, recomputed from the records as stored
    steady = four["steady"]
    assert steady["plateau"] == 4 and steady["cut_s"] > 0 and steady["requests"] <= 12
    again = dataclasses.asdict(steady_state(level_four))  # records in file order: sums agree to rounding
    for key in (
        "plateau",
        "start_s",
        "window_s",
        "cut_s",
        "requests",
        "output_tokens_per_s",
        "requests_per_s",
    ):
        assert steady[key] == pytest.approx(again[key]), key
    assert steady["ttft_s"]["p50"] == again["ttft_s"]["p50"]
    assert steady["output_tokens_per_s"] != four["output_tokens_per_s"]
    report = run_report(run)
    assert "## Many users, short prompts" in report and "n/a: a CPU run" in report
    assert "steady output tok/s (cut)" in report and f"{steady['output_tokens_per_s']:.1f} (" in report
    (row,) = collect(tmp_path / "results")
    # The evidence cell is the best level, whichever it was on this host.
    assert row.cell("throughput").value == pytest.approx(
        max(one["output_tokens_per_s"], four["output_tokens_per_s"])
    )


def test_speculative_decoding_acceptance_is_read_from_the_engines_counters(
    tmp_path: Path, tiny: TinyModel
) -> None:
    # The tiny model drafts for itself: under greedy sampling every drafted token should be accepted.
    run = run_one(
        tmp_path,
        """
[checks.throughput]
levels = [2]
prompt_tokens = 256
output_tokens = 64
requests_per_user = 2
warmup_requests = 0
""",
        f"""
[[deployments]]
name = "tiny-self-draft"
engine = "llamacpp"
model = "{tiny.gguf}"
tokenizer = "{tiny.tokenizer_dir}"
ctx_size = 4096
parallel = 2
args = ["--model-draft", "{tiny.gguf}", "--spec-type", "draft-simple"]
random_weights = true
""",
    )
    deltas = counter_deltas(run)["throughput-u2"]
    assert deltas["spec_draft_tokens"] > 0 and deltas["spec_drafts"] > 0
    rate, per_step = metrics.spec_acceptance(deltas)
    assert rate is not None and rate > 0.9 and per_step is not None and per_step > 1
    assert "draft acceptance" in run_report(run)


def test_variants_are_compared_side_by_side_with_intervals(tmp_path: Path, tiny: TinyModel) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        f"""
[campaign]
name = "variants"
results = "{tmp_path / "results"}"
[checks.throughput]
levels = [2]
prompt_tokens = 256
output_tokens = 32
requests_per_user = 3
"""
        + tiny_llamacpp(tiny, "plain")
        + tiny_llamacpp(
            tiny, "self-draft", args=f'["--model-draft", "{tiny.gguf}", "--spec-type", "draft-simple"]'
        )
        + """
[[compare]]
a = "plain"
b = "self-draft"
question = "does drafting help?"
"""
    )
    campaign = load_campaign(path)
    assert [o.status for o in run_campaign(campaign)] == ["done", "done"]
    from ctxbench.report.campaign import write_campaign_report

    markdown, html = write_campaign_report(campaign.campaign.results)
    text = markdown.read_text()
    assert "### plain vs self-draft: does drafting help?" in text
    line = next(line for line in text.splitlines() if line.startswith("| 2 users: TTFT s (median [95%])"))
    assert line.count("[") == 3 and ("| established" in line or "| not established" in line)
    assert "many users: output tok/s" in text and "difference" in html.read_text()


def test_repeats_give_medians_with_intervals_and_a_verdict(tmp_path: Path, tiny: TinyModel) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        f"""
[campaign]
name = "repeats"
results = "{tmp_path / "results"}"
repeats = 3
[checks.throughput]
levels = [1]
prompt_tokens = 128
output_tokens = 16
requests_per_user = 2
"""
        + tiny_llamacpp(tiny, "a")
        + tiny_llamacpp(tiny, "b")
        + '[[compare]]\na = "a"\nb = "b"\n'
    )
    campaign = load_campaign(path)
    outcomes = run_campaign(campaign)
    assert [(o.deployment, o.status) for o in outcomes] == [("a", "done")] * 3 + [("b", "done")] * 3
    assert len({o.run_id for o in outcomes}) == 6
    from ctxbench.report.campaign import write_campaign_report

    text = write_campaign_report(campaign.campaign.results)[0].read_text()
    repeats = text.split("## Repeats")[1].split("##")[0]
    assert "| a | 3 |" in repeats and "| b | 3 |" in repeats
    line = next(
        line for line in text.splitlines() if line.startswith("| over repeats: many users, best output tok/s")
    )
    assert line.count("[") == 3 and "established" in line
    assert [o.status for o in run_campaign(campaign)] == ["skipped"] * 6  # all six runs are done


def test_users_spread_over_client_processes_come_back_as_one_run(tmp_path: Path, tiny: TinyModel) -> None:
    # Three users over two client processes: users 0 and 2 in the first, 1 in the second; the parent writes
    # every record, labelled with its process, and the level is summarised as with one process.
    run = run_one(
        tmp_path,
        """
[checks.throughput]
levels = [3]
prompt_tokens = 128
output_tokens = 8
requests_per_user = 2
client_processes = 2
""",
        tiny_llamacpp(tiny, "tiny"),
    )
    level = json.loads((run.path / "throughput.json").read_text())["levels"]["3"]
    assert level["requests"] == 6 and level["failed"] == 0
    records = list(run.records())
    assert len(records) == 3 * (2 + 1) and len({r.request_id for r in records}) == len(records)
    processes = {
        r.labels["user"]: {
            x.labels["client_process"] for x in records if x.labels["user"] == r.labels["user"]
        }
        for r in records
    }
    assert processes == {"0": {"0"}, "1": {"1"}, "2": {"0"}}
    assert all(r.ok and r.chunks for r in records)
    # One clock for all: every worker's stamps fall between the parent's own /metrics snapshots taken just
    # before
    # and just after the check (a worker on another clock base would land far outside). Whether the two
    # processes'
    # requests interleaved is scheduling: on a busy host one process finished its 3 short requests before the
    # other had sent its first.
    snapshots = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    window = {s["phase"]: s["at_ns"] for s in snapshots if s["check"] == "throughput"}
    assert all(window["before"] < r.sent_ns < r.end_ns < window["after"] for r in records)


async def test_a_client_process_that_cannot_start_fails_the_level_with_a_message(
    tmp_path: Path, tiny: TinyModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker gets settings it cannot make a client from: it exits before saying ready, and the parent
    # says so instead of waiting for it.
    from ctxbench.checks import prompts as prompt_makers
    from ctxbench.checks.throughput import check as throughput
    from ctxbench.checks.throughput import closed_loop
    from ctxbench.client.stream import Client
    from ctxbench.errors import CtxbenchError
    from ctxbench.text.haystack import UnitPool
    from ctxbench.text.tokens import HfTokenCounter

    counter = HfTokenCounter.from_path(tiny.tokenizer_dir)
    from ctxbench.config.load_params import ThroughputParams

    spec = ThroughputParams(
        levels=[2], prompt_tokens=128, output_tokens=4, requests_per_user=1, client_processes=2
    )
    prompts = prompt_makers.PromptMaker(spec, UnitPool.generated(counter, units=64), counter, ("t",))
    monkeypatch.setattr(
        closed_loop, "client_settings", lambda client: {"router": False, "clients": [{"bogus": 1}]}
    )
    run = RunDir.create(tmp_path, "run")
    async with Client("http://127.0.0.1:9", "m") as client:
        with pytest.raises(CtxbenchError, match="did not start"):
            await throughput.run_throughput(client, prompts, spec, run, ("t",))
    assert not run.completed_units()


G = "gamma delta epsilon zeta eta theta iota kappa"  # longer than "alpha", so token counts tell them apart


def test_the_prompt_files_people_have_run_as_their_tools_read_them(tmp_path: Path, tiny: TinyModel) -> None:
    # Issue 69: the ShareGPT .json `vllm bench serve` reads was refused by its name (the same bytes as .jsonl
    # ran), a conversation of one turn refused the whole file, and text-part messages were refused, though
    # vLLM, SGLang and llama.cpp take them. Each now runs against llama-server, sending what it says.
    sharegpt = tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json"
    sharegpt.write_text(
        json.dumps(
            [
                {
                    "id": "a",
                    "conversations": [{"from": "human", "value": "alpha"}, {"from": "gpt", "value": "b"}],
                },
                {"id": "one turn", "conversations": [{"from": "human", "value": "skipped"}]},
                {"id": "empty", "conversations": []},
                {"id": "c", "conversations": [{"from": "human", "value": G}, {"from": "gpt", "value": "d"}]},
            ]
        )
    )
    parts = tmp_path / "parts.jsonl"
    parts.write_text(
        json.dumps(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
                    }
                ]
            }
        )
        + "\n"
    )
    counter = HfTokenCounter.from_path(tiny.tokenizer_dir)
    for name, source, sent in (("sharegpt", sharegpt, {"alpha", G}), ("parts", parts, {"one\ntwo"})):
        run = run_one(
            tmp_path / name,
            "[checks.throughput]\nlevels = [1]\nrequests_per_user = 4\noutput_tokens = 4\n"
            f'source = "{source}"\n',
            tiny_llamacpp(tiny),
        )
        records = [r for r in run.records() if r.check == "throughput"]
        assert len(records) == 5 and all(r.ok for r in records), [r.error for r in records]
        # the server counted what the file says, and nothing skipped was sent
        counted = {counter.count_chat([{"role": "user", "content": text}]) for text in sent}
        assert {metrics.prompt_tokens(r) for r in records} == counted, counted
        data = json.loads((run.path / "throughput.json").read_text())
        assert data["levels"]["1"]["requests"] == 4 and data["spec"]["source"] == str(source)
