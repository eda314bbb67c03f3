"""A run report's first screen: what passed, what did not and why, from the H200 run's files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxbench.records import RequestError, RequestRecord, requests_line
from ctxbench.report.run_report import run_report
from ctxbench.store.run_dir import RunDir

H200_RUN = Path(__file__).parents[2] / "docs" / "gpu-validation" / "h200-run1"


@pytest.fixture()
def run(tmp_path: Path) -> RunDir:
    shutil.copytree(H200_RUN, tmp_path / "results")
    (path,) = (tmp_path / "results" / "runs").iterdir()
    return RunDir(path)


def glance(run: RunDir) -> dict[str, list[str]]:
    """The glance table's rows by check: [verdict, result, why not, source]; and the report itself."""
    report = run_report(run)
    section = report.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {row[0].strip(): [cell.strip() for cell in row[1:]] for row in rows[1:]} | {"": [report]}


def as_random_weights(run: RunDir) -> None:
    manifest = json.loads((run.path / "manifest.json").read_text())
    manifest["random_weights"] = True
    (run.path / "manifest.json").write_text(json.dumps(manifest))


def test_the_first_screen_is_the_verdicts_and_the_status_with_its_reasons(run: RunDir) -> None:
    # this run's manifest predates the random-weights flag; set it as the newer runs do
    as_random_weights(run)
    rows = glance(run)
    report = rows.pop("")[0]
    assert report.index("## At a glance: PROVISIONAL") < report.index("## The run")
    assert rows["1 capacity"] == ["pass", "holds at 263136 of 263168", "", "`capacity.json`"]
    # random weights: their recall is shown and not judged, and the status says why
    assert rows["2 retrieval, fresh document"][0] == "not judged: random weights"
    assert rows["3 recall, 2 users"][:2] == ["not judged: random weights", "0/16"]
    assert rows["3 recall, 2 users"][3] == "`../../ramp1m.csv`"
    assert rows["3 decode under another user's prefill"][0] == "measured"
    # the capacity check's request over the limit was refused, as it should be: not a failed request
    # and it is counted once, in one place: the glance, the requests section and the console say the same
    line = "36 requests, 0 failed (and 1 over-limit prompt refused, as it should be)"
    assert rows["requests"][0] == "pass" and rows["requests"][1] == line
    assert f"## Requests\n\n{line}. TTFT" in report
    assert requests_line(list(run.records())) == line
    assert "Provisional because:\n- one-shot retrieval 0/6 is below n/n\n- random weights" in report


def test_what_did_not_pass_says_where(run: RunDir) -> None:
    run.append(
        RequestRecord(
            request_id="late",
            endpoint="chat",
            url="http://127.0.0.1:1/v1/chat/completions",
            model="m",
            request_bytes=10,
            enqueued_ns=0,
            sent_ns=0,
            end_ns=1,
            error=RequestError(kind="timeout", message="read timed out"),
        )
    )
    rows = glance(run)
    verdict, result, why, _ = rows["2 retrieval, fresh document"]
    assert verdict == "**FAIL**" and result == "0/6 (to 131072 tokens)"
    assert why.startswith("32768 tokens at depth 10% (answered '424 424") and why.endswith("; and 3 more")
    verdict, _, why, _ = rows["3 recall, alone"]
    assert verdict == "**FAIL**" and why.startswith("user 0 turn 1 at 32768 tokens; user 0 turn 2 at")
    assert rows["requests"][0] == "**FAIL**" and rows["requests"][2] == "1 timeout"


def test_a_relative_results_directory_names_the_requests_file_where_it_is(
    run: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 57: the demo (results = "results", relative) linked `../../results/runs/<id>/requests.jsonl`.
    monkeypatch.chdir(run.path.parent.parent.parent)
    relative = RunDir(Path("results") / "runs" / run.run_id)
    assert glance(relative)["requests"][3] == "`requests.jsonl`"
    assert glance(run)["requests"][3] == "`requests.jsonl`"
