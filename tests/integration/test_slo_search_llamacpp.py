"""The SLO search against the real llama-server: with 2 slots, a TTFT limit well under one request's decode
time is met by 2 users (each request finds a free slot) and broken by 3 (one always waits for a slot), and
the search finds exactly that, in a bounded number of levels, each recorded like any level."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaigns import run_campaign_file, tiny_llamacpp, write_campaign

from ctxbench.campaigns.suite import run_suite
from ctxbench.checks.catalog import Checks
from ctxbench.config.load_params import SloParams, ThroughputParams
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.llamacpp import LlamaServerConfig
from ctxbench.engines.models import TinyModel
from ctxbench.measure import metrics
from ctxbench.report.run_report import run_report
from ctxbench.results.evidence import collect
from ctxbench.store.run_dir import RunDir
from ctxbench.text.tokens import HfTokenCounter

pytestmark = pytest.mark.engine

OUTPUT_TOKENS = 1024  # a long decode, so that waiting for a slot dwarfs a 128-token prefill


def campaign_run(tmp_path: Path, name: str, checks: str, tiny: TinyModel) -> tuple[Path, RunDir]:
    """Campaign `name` in a directory of its own, on two slots of the tiny model; its file and its run."""
    path = write_campaign(tmp_path / name, checks, tiny_llamacpp(tiny, "tiny-2-slots"), name)
    (outcome,) = run_campaign_file(path)
    assert outcome.status == "done", outcome.error
    return path, RunDir(tmp_path / name / "results" / "runs" / str(outcome.run_id))


def test_the_search_finds_the_slots_a_ttft_limit_allows(tmp_path: Path, tiny: TinyModel) -> None:
    shape = f"prompt_tokens = 128\noutput_tokens = {OUTPUT_TOKENS}\nrequests_per_user = 3\n"
    # One user alone: how long a whole request's decode takes here, now (a busy host is slower at both).
    _, alone = campaign_run(tmp_path, "alone", f"[checks.throughput]\nlevels = [1]\n{shape}", tiny)
    tpot = json.loads((alone.path / "throughput.json").read_text())["levels"]["1"]["tpot_s"]["p50"]
    limit = round(OUTPUT_TOKENS * tpot / 4, 4)  # a quarter of one request's decode: a prefill is far under it
    path, run = campaign_run(
        tmp_path,
        "search",
        f'[checks.throughput]\nlevels = []\n{shape}search = "users"\nsearch_repeats = 2\n'
        f'slo = {{ ttft_p99_s = {limit}, judged_by = "estimate" }}\n',  # 3 requests a user: no p99 bound
        tiny,
    )
    data = json.loads((run.path / "throughput.json").read_text())
    found = data["search"]
    ttft = {users: level["ttft_s"]["p99"] for users, level in data["levels"].items()}
    assert (found["met"], found["broken"]) == (2, 3), (limit, ttft)
    assert [p["level"] for p in found["probes"]] == [1, 2, 4, 3]  # doubling, then one bisection
    assert found["broken_by"][0]["limit"] == "ttft_p99_s" and found["stopped"] == "the bracket closed"
    assert sorted(data["levels"]) == ["1", "2", "3", "4"]  # each probe recorded as a level
    # The level found ran twice, the repeat with its own prompts and request ids.
    assert (found["met_runs"], found["runs"]) == (2, 2)
    repeat = data["repeats"]["throughput-u2-rep1"]
    assert not set(repeat["request_ids"]) & set(data["levels"]["2"]["request_ids"])
    records = {r.request_id: r for r in run.records()}
    assert all(records[i].labels["repeat"] == "1" for i in repeat["request_ids"])
    assert all(metrics.prompt_tokens(records[i]) == 128 for i in repeat["request_ids"])
    report = run_report(run)
    assert "### The highest level within the SLO" in report and "**2 users**, met in 2 of 2 runs" in report
    (row,) = collect(tmp_path / "search" / "results")
    assert not [r for r in row.reasons if "cache audit" in r], row.reasons  # fresh prompts: no cache hits
    assert row.cell("slo").value == 2 and row.cell("slo").text.startswith(
        f"2 users within TTFT p99 <= {limit:g} s"
    )
    # Run again: every probe is done, nothing is sent, and the search reads the same.
    before = len(records)
    (again,) = run_campaign_file(path)
    assert again.status == "skipped" and len(list(run.records())) == before


def test_a_level_judged_by_its_p99_runs_on_until_decided_and_the_search_concludes(
    tmp_path: Path, tiny: TinyModel
) -> None:
    # Issue 68: with 4 requests a user every level "broke" (4 requests give a p99 no upper end) and the search
    # stopped at its first probe. Now each level runs on, fresh requests, until its interval decides it.
    _, run = campaign_run(
        tmp_path,
        "decided",
        "[checks.throughput]\nlevels = []\nprompt_tokens = 128\noutput_tokens = 4\nrequests_per_user = 4\n"
        'search = "users"\nsearch_to = 2\nslo = { ttft_p99_s = 600 }\n',
        tiny,
    )
    data = json.loads((run.path / "throughput.json").read_text())
    found = data["search"]
    assert [(p["level"], p["verdict"]) for p in found["probes"]] == [(1, "met"), (2, "met")]
    assert (
        found["met"] == 2 and found["stopped"] == "every level probed met the SLO, up to the highest searched"
    )
    records = list(run.records())
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids))  # every round's requests are fresh: new ids, new prompts
    for users in ("1", "2"):
        level = data["levels"][users]
        # 4 a user first, then one more round aiming at the 368 requests a p99's upper end needs
        assert level["rounds"] == 2 and level["verdict"] == "met" and level["requests"] >= 368
        assert level["ttft_s"]["n"] == level["requests"] and level["ttft_s"]["p99_ci"][1] <= 600
        measured = [r for r in records if r.labels.get("users") == users and not r.warmup]
        assert sorted(r.request_id for r in measured) == sorted(level["request_ids"])
        assert sum(r.warmup for r in records if r.labels.get("users") == users) == int(users)  # round 1 only
    assert all(r.cache is not None and r.cache.reuse == "fresh" for r in records)
    report = run_report(run)
    assert "| 1 | 1 | met | 368 (2) |" in report, report  # the requests each probe took, and its rounds


def test_a_level_its_cap_stops_undecided_reads_undetermined_never_broke(
    tmp_path: Path, tiny: TinyModel
) -> None:
    _, run = campaign_run(
        tmp_path,
        "capped",
        "[checks.throughput]\nlevels = []\nprompt_tokens = 128\noutput_tokens = 4\nrequests_per_user = 4\n"
        'search = "users"\nsearch_to = 2\nslo = { ttft_p99_s = 600, max_requests = 20 }\n',
        tiny,
    )
    data = json.loads((run.path / "throughput.json").read_text())
    found, level = data["search"], data["levels"]["1"]
    assert (level["requests"], level["rounds"], level["verdict"]) == (20, 2, "undetermined")
    assert level["stopped_by"] == "max_requests = 20" and level["ttft_s"]["p99"] < 600
    assert [(p["level"], p["verdict"]) for p in found["probes"]] == [(1, "undetermined")]
    assert (found["met"], found["broken"], found["above"], found["undetermined"]) == (None, None, 1, [1])
    (row,) = collect(tmp_path / "capped" / "results")
    text = row.cell("slo").text
    assert text.startswith(
        "none shown to meet TTFT p99 <= 600 s (each percentile by its 95% interval) (1 users undetermined: "
        "TTFT p99 ["
    ), text
    assert "from 20 request(s) (about 368 would decide it)" in text and "broke" not in text
    report = run_report(run)
    section = report.split("### The highest level")[1].split("\n#")[0]
    assert "undetermined: TTFT p99 [" in section and "broke" not in section, section


def test_a_rate_search_runs_each_rate_on_until_decided(tmp_path: Path, tiny: TinyModel) -> None:
    # The rate search by the default judgement: 4 requests a rate give a p90 no upper end (36 do); each rate
    # runs more arrivals at the same rate until its p90 is decided, met within 60 s or broken by saturating.
    _, run = campaign_run(
        tmp_path,
        "rates-decided",
        "[checks.throughput]\nlevels = []\nrequests_per_rate = 4\nprompt_tokens = 128\noutput_tokens = 4\n"
        'search = "rate"\nsearch_from = 8.0\nsearch_to = 16.0\nslo = { ttft_p90_s = 60 }\n',
        tiny,
    )
    data = json.loads((run.path / "throughput.json").read_text())
    found = data["search"]
    assert [p["level"] for p in found["probes"]][0] == 8.0
    assert all(p["verdict"] in ("met", "broke") for p in found["probes"]), found["probes"]
    for probe in found["probes"]:
        rate = data["rates"][f"{probe['level']:g}"]
        if probe["verdict"] == "met":  # shown to meet: at least the 36 requests a p90's upper end needs
            assert rate["requests"] >= 36 and rate["rounds"] >= 2 and rate["ttft_s"]["p90_ci"][1] <= 60
        else:
            assert rate["saturated"], rate
    records = list(run.records())
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids))
    offered = [r for r in records if r.labels.get("rate") == "8"]
    assert len(offered) == data["rates"]["8"]["requests"] >= 36  # its rounds, every one recorded


def test_a_search_over_levels_already_measured_reads_them_back_and_sends_no_request_twice(
    tmp_path: Path, tiny: TinyModel
) -> None:
    # Issue 51: the demo's campaign (levels [1, 2], then a search from 1 user) sent levels 1 and 2 again
    # under the same request ids with the same prompts, and the cached re-runs replaced the fresh figures.
    from ctxbench.audits.prefix_cache import audit_run

    _, run = campaign_run(
        tmp_path,
        "levels-then-search",
        "[checks.throughput]\nlevels = [1, 2]\nprompt_tokens = 128\noutput_tokens = 8\n"
        'requests_per_user = 2\nsearch = "users"\nsearch_to = 3\n'
        'slo = { ttft_p99_s = 600, judged_by = "estimate" }\n',
        tiny,
    )
    data = json.loads((run.path / "throughput.json").read_text())
    assert [p["level"] for p in data["search"]["probes"]] == [1, 2, 3]
    records = list(run.records())
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    measured = [r for r in records if r.check == "throughput" and not r.warmup]
    assert sorted(int(r.labels["users"]) for r in measured) == [1] * 2 + [2] * 4 + [3] * 6
    for users, level in data["levels"].items():  # each level's figures are its one, fresh run
        assert sorted(level["request_ids"]) == sorted(
            r.request_id for r in measured if r.labels["users"] == users
        )
    assert all(r.cache is not None and r.cache.reuse == "fresh" for r in records)
    audit = audit_run(run)
    assert audit.findings == () and audit.audited_requests == len(records)


def test_a_rate_search_reads_back_a_rate_already_offered(tmp_path: Path, tiny: TinyModel) -> None:
    # The rate search had never run against an engine.
    _, run = campaign_run(
        tmp_path,
        "rate-search",
        "[checks.throughput]\nlevels = [1]\nrates = [1.0]\nrequests_per_rate = 4\nprompt_tokens = 128\n"
        'output_tokens = 8\nrequests_per_user = 2\nsearch = "rate"\nsearch_from = 1.0\nsearch_to = 2.0\n'
        'slo = { ttft_p99_s = 600, judged_by = "estimate" }\n',
        tiny,
    )
    data = json.loads((run.path / "throughput.json").read_text())
    found = data["search"]
    assert [p["level"] for p in found["probes"]] == [1.0, 2.0] and found["met"] == 2.0
    assert found["stopped"] == "every level probed met the SLO, up to the highest searched"
    records = list(run.records())
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids))
    by_rate = {rate: [r for r in records if r.labels.get("rate") == rate] for rate in ("1", "2")}
    assert [len(by_rate["1"]), len(by_rate["2"])] == [4, 4]  # 1/s offered once, then read back by the search
    assert sorted(data["rates"]) == ["1", "2"]


class Interrupt(Exception):
    pass


def test_a_search_interrupted_mid_level_resumes_with_each_level_measured_once_and_fresh(
    llama_build: LlamaCppBuild, tiny: TinyModel, tmp_path: Path
) -> None:
    # Issue 51: the search's levels are units a resumed run reads back; the level cut off is sent again by the
    # new attempt under new ids and new prompts (the interrupted attempt's prompts may sit in a cache).
    from ctxbench.audits.prefix_cache import audit_run

    config = LlamaServerConfig(
        binary=llama_build.server, model=tiny.gguf, ctx_size=2 * 2048, parallel=2, alias="tiny"
    )
    counter = HfTokenCounter.from_path(tiny.tokenizer_dir)
    checks = Checks(
        throughput=ThroughputParams(
            levels=[1],
            prompt_tokens=128,
            output_tokens=8,
            requests_per_user=2,
            search="users",
            search_to=3,
            slo=SloParams(ttft_p99_s=600, judged_by="estimate"),
        )
    )
    results = tmp_path / "results"
    sent = 0

    def cut_in_the_search() -> None:  # level 1 (3 requests), then 3 of the search's 2-user level's 6
        nonlocal sent
        sent += 1
        if sent == 6:
            raise Interrupt()

    with pytest.raises(Interrupt):
        run_suite(
            config,
            counter,
            checks,
            results,
            deployment="tiny",
            campaign="cut",
            on_request_done=cut_in_the_search,
        )
    (path,) = (results / "runs").iterdir()
    assert RunDir(path).completed_units() == {"throughput-u1"}
    run = run_suite(config, counter, checks, results, deployment="tiny", campaign="cut", resume=path)
    assert run.attempt == 2
    data = json.loads((path / "throughput.json").read_text())
    assert [p["level"] for p in data["search"]["probes"]] == [1, 2, 3]
    levels = {users: level["request_ids"] for users, level in data["levels"].items()}
    assert sorted(levels) == ["1", "2", "3"]
    assert not [i for i in levels["1"] if i.endswith("-a2")]  # read back, not sent again
    assert all(
        i.endswith("-a2") for i in levels["2"] + levels["3"]
    )  # the cut level, whole, in the new attempt
    records = list(run.records())
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids))
    second = [r for r in records if r.request_id.endswith("-a2")]
    assert sorted(int(r.labels["users"]) for r in second) == [2] * 6 + [3] * 9
    audit = audit_run(run)
    assert audit.findings == () and audit.audited_requests == len([r for r in records if r.ok])


def test_a_level_spread_over_client_processes_runs_its_rounds_there_too(
    tmp_path: Path, tiny: TinyModel
) -> None:
    # The rounds a judged level runs go through the same executor as its first: two client processes here,
    # each round's requests numbered on from the last, fresh, and every one back in the run.
    _, run = campaign_run(
        tmp_path,
        "processes",
        "[checks.throughput]\nlevels = [2]\nprompt_tokens = 128\noutput_tokens = 4\nrequests_per_user = 2\n"
        'client_processes = 2\nsearch = "users"\nsearch_to = 2\nslo = { ttft_p90_s = 600 }\n',
        tiny,
    )
    data = json.loads((run.path / "throughput.json").read_text())
    level = data["levels"]["2"]
    assert (level["verdict"], level["rounds"], level["requests"]) == ("met", 2, 36)  # a p90's upper end: 36
    records = [
        r for r in run.records() if r.check == "throughput" and not r.warmup and r.labels.get("users") == "2"
    ]
    assert sorted(r.request_id for r in records) == sorted(level["request_ids"])
    assert len({r.request_id for r in records}) == 36
    assert {r.labels.get("client_process") for r in records} == {"0", "1"}  # both processes, both rounds
