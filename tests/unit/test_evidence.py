"""Status rules, cost, and the evidence report built from a real results directory (the H200 run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxbench.checks.base import Judgement
from ctxbench.checks.capacity import CAPACITY
from ctxbench.checks.capacity.file import CapacityFile
from ctxbench.checks.needle import NEEDLE
from ctxbench.checks.needle.file import NeedleFile, NeedleTrial, Recall
from ctxbench.plan import cost_per_million
from ctxbench.records import Chunk, RequestRecord, Usage
from ctxbench.report.campaign import inline_code, write_campaign_report
from ctxbench.results.evidence import Facts, collect, refusals, status_of
from ctxbench.store.run_dir import RunDir

H200_RUN = Path(__file__).parents[2] / "docs" / "gpu-validation" / "h200-run1"
ALL: dict[str, object] = {"checks": {"capacity", "needle", "ramp"}}


def needle_file(found: list[bool], counted: list[int] | None = None) -> NeedleFile:
    """The single literal fact asked at 8192 tokens, once per entry of `found`; the server counted
    `counted` tokens for each (the planned 8192 where not given)."""
    counted = counted or [8192] * len(found)
    trials = [
        NeedleTrial(
            length=8192,
            depth=i / len(found),
            request_id=f"needle-{i}",
            seed=i,
            planned_tokens=8192,
            prompt_tokens=tokens,
            cached_tokens=0,
            ttft_s=1.0,
            found=hit,
            expected="x",
            answer="x" if hit else "y",
            skipped=None,
            error=None,
            cache_hit_suspected=False,
        )
        for i, (hit, tokens) in enumerate(zip(found, counted, strict=True))
    ]
    return NeedleFile(recall_by_length={"8192": Recall(found=sum(found), scored=len(found))}, trials=trials)


def test_complete_evidence_is_validated() -> None:
    assert status_of(Facts(**{**ALL}), random_weights=False) == (
        "validated",
        (),
    )


def capacity_file(holds: bool, count_error: int = 0, said: str = "") -> CapacityFile:
    return CapacityFile(
        limit_tokens=8192,
        limit_source="x",
        target_tokens=8160,
        accepted=holds or bool(said),
        prompt_tokens=8160 + count_error,
        count_error_tokens=count_error,
        prefill_s=None,
        prefill_tokens_per_s=None,
        near_limit_error=f"prompt_not_planned: {said}"
        if said
        else None
        if holds
        else "context_limit: too long",
        over_limit_tokens=8448,
        over_limit_rejected=True,
        over_limit_outcome="rejected",
        request_ids=("capacity-near", "capacity-over"),
        holds=holds,
    )


def test_a_failed_capacity_fails_the_row_whatever_else_holds(tmp_path: Path) -> None:
    """The capacity check's own judgement (`Check.judge`) fails the run; a count error within the tolerance
    is said, not failed."""
    run = RunDir.create(tmp_path, "r")
    run.write_manifest({"deployment": "d", "checks": ["capacity"]})
    capacity_file(holds=False).save(run.path)
    judged = [CAPACITY.judge(run, False)]
    status, reasons = status_of(Facts(**{**ALL, "judgements": judged}), random_weights=False)
    assert status == "failed" and reasons == ("the capacity claim does not hold",)
    capacity_file(holds=True, count_error=3).save(run.path)
    judged = [CAPACITY.judge(run, False)]
    status, reasons = status_of(Facts(**{**ALL, "judgements": judged}), random_weights=False)
    assert status == "provisional" and reasons == (
        "the capacity prompt's planned length differs from the server's count by +3 tokens (within the "
        "tolerance; docs/metrics.md)",
    )


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        ({"cache_findings": 1}, "the cache audit has 1 finding(s) (`ctxbench audit-cache`)"),
        ({"token_fallback": True}, "some token counts came from a fallback, not the server's usage"),
        (
            {"template_warnings": ["the model has no chat template"]},
            "the model has no chat template",
        ),
        ({"checks": {"capacity", "ramp"}}, "the needle check did not run"),
    ],
)
def test_each_rule_makes_the_row_provisional_and_says_why(facts: dict[str, object], reason: str) -> None:
    status, reasons = status_of(Facts(**{**ALL, **facts}), random_weights=False)
    assert status == "provisional" and reason in reasons


def test_the_needle_judges_its_own_results_and_they_follow_the_claims_the_run_left_out(
    tmp_path: Path,
) -> None:
    """The needle check's judgement (`Check.judge`, from needle.json): a recall below n/n and planned lengths
    the server counted otherwise; placed after the checks that did not run, before the cache audit's."""
    run = RunDir.create(tmp_path, "r")
    run.write_manifest({"deployment": "d", "checks": ["needle"]})
    needle_file([True, True, True]).save(run.path)
    assert NEEDLE.judge(run, False) == Judgement()
    needle_file([True, False, True], counted=[8191, 8194, 8192]).save(run.path)
    judged = NEEDLE.judge(run, False)
    assert judged.results == (
        "one-shot retrieval 2/3 is below n/n",
        "2 planned prompt length(s) differ from the server's count (by up to +2 tokens, within the "
        "tolerance; docs/metrics.md)",
    )
    facts = Facts(checks={"needle", "ramp"}, judgements=[judged], cache_findings=1)
    status, reasons = status_of(facts, random_weights=False)
    assert status == "provisional" and reasons == (
        "the capacity check did not run",
        *judged.results,
        "the cache audit has 1 finding(s) (`ctxbench audit-cache`)",
    )


def test_a_prompt_the_server_did_not_see_fails_the_row_and_names_the_counts() -> None:
    message = "server counted 3 tokens, planned 2048 (-2045, beyond the tolerance of 20): the server ..."
    status, reasons = status_of(
        Facts(**{**ALL, "not_planned": [message, message]}),
        random_weights=False,
    )
    assert status == "failed"
    assert reasons == (
        "2 prompt(s) were not what was planned, first: server counted 3 tokens, planned 2048; no figure "
        "or recall speaks for the planned lengths",
    )


def test_random_weights_are_always_provisional() -> None:
    status, reasons = status_of(Facts(**{**ALL}), random_weights=True)
    assert status == "provisional" and reasons == ("random weights: recall is noise",)


def test_cost_per_million_tokens() -> None:
    # One GPU for one hour at $3.50 producing 3.5M tokens costs $1 a million.
    assert cost_per_million(3.50, 1, 3600, 3_500_000) == pytest.approx(1.0)
    assert cost_per_million(3.50, 8, 1800, 1_000_000) == pytest.approx(14.0)
    assert cost_per_million(3.50, 0, 3600, 1_000_000) is None


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(H200_RUN, copy)
    return copy


def test_evidence_row_from_the_h200_run_names_its_sources(results: Path) -> None:
    (row,) = collect(results)
    assert row.deployment == "random-740m-llamacpp-cuda-h200"
    assert row.cell("capacity").text == "holds at 263136 of 263168"
    assert row.cell("capacity").source.endswith("capacity.json") and row.cell("retrieval").source.endswith(
        "niah.log"
    )
    assert row.cell("retrieval").text.startswith("0/6") and row.status == "provisional"
    assert row.cell("recall_alone").text == "0/8" and row.cell("recall_shared").text == "0/16"
    assert row.cell("ttft_shared").value == pytest.approx(21.47, abs=0.01)
    assert row.cell("stall").value is not None and row.cell("stall").value > 2


def test_report_is_rebuilt_from_files_and_escapes_model_output(results: Path) -> None:
    (run_dir,) = (results / "runs").iterdir()
    needle = json.loads((run_dir / "needle.json").read_text())
    needle["trials"][0]["answer"] = "<script>alert('x')</script>"
    (run_dir / "needle.json").write_text(json.dumps(needle))
    markdown_path, html_path = write_campaign_report(results)
    html = html_path.read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    # the needle answers say each outcome in a word, as the Markdown does; the guide's `names` are code
    answers = html.split("<h2>Needle answers</h2>")[1].split("</table>")[0]
    assert "<td>no</td>" in answers and "True" not in answers and "False" not in answers
    guide = html.split('<ul id="guide">')[1].split("</ul>")[0]
    assert "`" not in guide and "<code>" in guide, guide
    # plotly.js inlined once, the figures' data, their drawing, sorting and filtering: all inline
    assert html.count("<script") == 4 and "Plotly.newPlot" in html
    figures = json.loads(html.split('id="figure-data">')[1].split("</script>")[0])
    titles = [f["layout"]["title"]["text"] for f in figures]
    # each check's figures, in the claims' order (`Check.figures`): retrieval, then the ramp
    assert titles[:3] == [
        "One-shot retrieval by length and depth (share of trials that found the fact)",
        "TTFT against context (the conversation ramp)",
        "Recall per turn (green: the planted fact was found)",
    ]
    # the page without plotly.js: no link to fetch (the browser test watches the requests), one image
    page = html.split("<script>", 1)[0] + html.split('<script type="application/json"', 1)[1]
    assert "http://" not in page and "https://" not in page
    assert 'id="evidence"' in page and "data:image/png;base64," not in page
    # the 2-user timeline is a figure too: one prefill bar and one decode bar per request of that ramp
    (drawn,) = [f for f in figures if f["layout"]["title"]["text"].endswith("two users, prefill and decode")]
    prefill, decode = drawn["data"][:2]
    requests = [r for r in RunDir(run_dir).records() if r.labels.get("users") == "2"]
    assert len(prefill["x"]) == len(decode["x"]) == len(requests) == 16
    first = min(requests, key=lambda r: r.sent_ns)
    assert prefill["base"][requests.index(first)] == 0.0
    assert prefill["x"][requests.index(first)] == pytest.approx(
        (first.chunks[0].arrived_ns - first.sent_ns) / 1e9
    )
    # the Markdown report keeps static figures, as files beside it
    assert (
        "![TTFT against context, and recall per turn](figures/ttft-and-recall.png)"
        in markdown_path.read_text()
    )
    assert (results / "figures" / "ttft-and-recall.png").stat().st_size > 1000
    assert "| random-740m-llamacpp-cuda-h200" in markdown_path.read_text()


def test_a_run_of_a_cpu_deployment_has_no_gpu_cost(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "cpu-run")
    run.write_manifest({"deployment": "cpu", "checks": ["probe"]})
    run.append(
        RequestRecord(
            request_id="r",
            endpoint="chat",
            url="http://127.0.0.1:1/x",
            model="m",
            request_bytes=1,
            enqueued_ns=0,
            sent_ns=0,
            end_ns=10,
            chunks=(Chunk(arrived_ns=5, text="x"),),
            usage=Usage(prompt_tokens=1, completion_tokens=1),
        )
    )
    (row,) = collect(tmp_path)
    assert row.cell("cost").text == "not run" and row.status == "provisional"
    assert "the capacity check did not run" in row.reasons


def test_every_cost_of_a_row_is_at_the_price_its_manifest_recorded_unless_overridden(results: Path) -> None:
    (manifest,) = results.glob("runs/*/manifest.json")
    recorded = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**recorded, "price_per_gpu_hour": 2.00, "gpus": 1}))
    (row,) = collect(results)  # no price given: the run's own, not a default
    assert "at $2.00/h" in row.cell("cost").text
    (priced,) = collect(results, 7.00)
    assert "at $7.00/h" in priced.cell("cost").text and priced.cell("cost").value == pytest.approx(
        row.cell("cost").value * 3.5
    )


def _failed(name: str, status: int, check: str, kind: str = "http_status") -> RequestRecord:
    from built_records import request

    from ctxbench.records import RequestError

    return request(name, 0, 1, labels={"check": check}).model_copy(
        update={
            "http_status": status,
            "error": RequestError(kind=kind, message=f"HTTP {status}: no"),
            "usage": None,
        }
    )


def test_requests_the_server_refused_fail_the_row_and_name_the_first() -> None:
    # Issue 51: a many-users level whose every request got HTTP 400 read PROVISIONAL; the campaign exited 0.
    refused = [_failed("tput-u1-user0-0", 400, "throughput"), _failed("tput-u1-user0-1", 400, "throughput")]
    status, reasons = status_of(
        Facts(**{**ALL, "refused": refused}),
        random_weights=False,
    )
    assert status == "failed"
    assert reasons[0].startswith(
        "2 request(s) refused by the server (throughput 2), first tput-u1-user0-0 (HTTP 400)"
    )


@pytest.mark.parametrize(
    ("status", "check", "kind"),
    [(429, "throughput", "http_status"), (503, "throughput", "http_status"), (400, "trace", "context_limit")],
)
def test_load_failures_and_a_trace_s_over_long_lines_are_not_refusals(
    status: int, check: str, kind: str
) -> None:
    assert refusals([_failed("r", status, check, kind)]) == []
    assert refusals([_failed("r", 400, "throughput", "http_status")]) != []


def test_a_counting_mismatch_at_the_limit_is_named_as_one_not_as_the_capacity(tmp_path: Path) -> None:
    # Issue 57: "capacity: does NOT hold ... (prompt_not_planned)" and "the capacity claim does not hold"
    # for a server that counts the prompt otherwise; the cell cut mid-word.
    from ctxbench.records import RequestError

    run = RunDir.create(tmp_path, "miscounted")
    run.write_manifest({"deployment": "d", "checks": ["capacity"]})
    said = (
        "server counted 9912 tokens, planned 8160 (+1752, beyond the tolerance of 88: its chat template or "
        "tokenizer is not the counter's)"
    )
    error = RequestError(kind="prompt_not_planned", message=said)
    near = _failed("capacity-near", 200, "capacity").model_copy(update={"error": error, "http_status": 200})
    run.append(near)
    capacity_file(holds=False, count_error=1752, said=said).save(run.path)
    (row,) = collect(tmp_path)
    assert row.cell("capacity").text.startswith(
        "not concluded: a counting mismatch (server counted 9912 tokens"
    )
    assert row.cell("capacity").text.endswith(" ...)") and "beyo" not in row.cell("capacity").text.split()[-2]
    assert row.status == "failed" and row.reasons[0].startswith("1 prompt(s) were not what was planned")
    assert not any("capacity claim" in reason for reason in row.reasons)


def test_inline_code_escapes_and_marks_backticked_spans() -> None:
    assert str(inline_code("a `<b>` c")) == "a <code>&lt;b&gt;</code> c"
    assert str(inline_code("`x` and `y")) == "<code>x</code> and `y"  # an unmatched backtick stays one


def test_a_needle_prompt_not_as_planned_fails_its_cell_by_the_error_s_kind(tmp_path: Path) -> None:
    from ctxbench.checks.needle.cell import needle_cells

    run = RunDir.create(tmp_path, "r")
    run.write_manifest({"deployment": "d", "checks": ["needle"]})
    needle = needle_file([True, True])
    failed = needle.trials[1].model_copy(
        update={"found": None, "error": "prompt_not_planned: server counted 3 tokens, planned 8192 (-8189)"}
    )
    assert failed.error_kind == "prompt_not_planned" and needle.trials[0].error_kind is None
    needle.model_copy(update={"trials": [needle.trials[0], failed]}).save(run.path)
    cell = needle_cells(tmp_path, run)["retrieval"]
    assert cell.text == "FAILS: 1 prompt(s) not as planned (server counted 3 tokens, planned 8192)"
    assert cell.scored is None
