"""Real models' vocabularies against the real llama-server (issue 38): a SentencePiece GGUF counted as the
server counts it, by ctxbench's own counter and by the server's /tokenize; the whole suite on it with every
prompt exactly as planned; a chat template that drops the content fails loudly, with the counts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conformance import assert_agrees_with_engine, suite

from ctxbench.campaigns.campaign import run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.engines.build import LlamaCppBuild
from ctxbench.engines.chat_template import served_template, template_warnings
from ctxbench.engines.llamacpp import LlamaServer, LlamaServerConfig
from ctxbench.engines.models import TinyModel, TinyModelSpec, tiny_model
from ctxbench.results.evidence import evidence_row
from ctxbench.store.run_dir import RunDir
from ctxbench.text.corpus import ProseGenerator
from ctxbench.text.gguf_vocab import SentencePieceCounter, gguf_token_counter
from ctxbench.text.tokens import load_token_counter

pytestmark = pytest.mark.engine

SPM = TinyModelSpec(vocabulary="sentencepiece")


@pytest.fixture(scope="module")
def spm_model() -> TinyModel:
    return tiny_model(spec=SPM)


@pytest.fixture(scope="module")
def spm_server(
    llama_build: LlamaCppBuild, spm_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    config = LlamaServerConfig(
        binary=llama_build.server, model=spm_model.gguf, ctx_size=4096, parallel=2, alias="tiny"
    )
    with LlamaServer(config, tmp_path_factory.mktemp("spm-server") / "server.log") as server:
        yield server


def texts() -> list[str]:
    prose = ProseGenerator("vocabulary-test")
    odd = [
        " Lisbon",
        " the",
        "\n\nA",
        " ünïcödé",
        " 日本語",
        " emoji 😀",
        " 12.5%",
        "  two  spaces",
        "tab\there",
    ]
    return ["\n\n" + prose.paragraph() for _ in range(120)] + odd


def chats() -> list[list[dict[str, str]]]:
    prose = ProseGenerator("vocabulary-chats")
    out = []
    for i in range(16):
        ask = {"role": "user", "content": f"Archive {i}. Read it.\n\n{prose.paragraph()}\n\nWhat is it?"}
        if i % 2:
            out.append(
                [
                    {"role": "system", "content": "Be brief."},
                    ask,
                    {"role": "assistant", "content": "Ok."},
                    ask,
                ]
            )
        else:
            out.append([ask])
    return out


def test_a_sentencepiece_gguf_is_counted_as_llama_server_counts_it(
    spm_model: TinyModel, spm_server: LlamaServer
) -> None:
    local = gguf_token_counter(spm_model.gguf)
    assert isinstance(local, SentencePieceCounter)
    server = load_token_counter("server", None, spm_server.base_url, "tiny")
    # in context: the server counts a text after the anchor, without the space it puts before a whole text
    assert local.count_many(texts()) == server.count_many(texts())
    with httpx.Client(base_url=spm_server.base_url, timeout=60) as http:
        for messages in chats():
            body = {"messages": messages, "max_tokens": 1}
            served = http.post("/v1/chat/completions", json=body).json()["usage"]["prompt_tokens"]
            assert (local.count_chat(messages), server.count_chat(messages)) == (served, served)
    server.close()


def test_the_whole_suite_on_a_sentencepiece_gguf_sends_every_prompt_as_planned(tmp_path: Path) -> None:
    path = tmp_path / "spm.toml"
    path.write_text(
        f'[campaign]\nname = "spm"\nresults = "{tmp_path / "results"}"\n'
        + suite(tmp_path)
        + """
[[deployments]]
name = "tiny-sentencepiece"
engine = "llamacpp"
model = "ctxbench:tiny"
tiny_model = { vocabulary = "sentencepiece" }
served_name = "tiny"
ctx_size = 4096
parallel = 2
random_weights = true
"""
    )
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign)
    assert outcome.status == "done", outcome
    run = RunDir(campaign.campaign.results / "runs" / str(outcome.run_id))
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["tokenizer"].startswith("gguf:") and manifest["chat_template"]["counter"] == "same"
    planned = [
        (r.request_id, r.usage.prompt_tokens - int(r.labels["planned_tokens"]))
        for r in run.records()
        if r.labels.get("planned_tokens") and r.usage is not None and r.usage.prompt_tokens is not None
    ]
    checks = {r.labels.get("check") for r in run.records() if r.labels.get("planned_tokens")}
    assert {"capacity", "needle", "ramp", "throughput", "trace", "returning"} <= checks
    assert [p for p in planned if p[1] != 0] == [] and len(planned) > 40
    assert_agrees_with_engine(run, reports_cached=True, event_per_token=False)


def campaign_with_template(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "template.toml"
    path.write_text(
        f"""
[campaign]
name = "template"
results = "{tmp_path / "results"}"

[checks.needle]
lengths = [384]
depths = [0.5]

[[deployments]]
name = "tiny-gemma-text"
engine = "llamacpp"
model = "ctxbench:tiny"
served_name = "tiny"
ctx_size = 4096
parallel = 2
args = ["--chat-template", "gemma"]
{extra}
"""
    )
    return path


def test_a_template_that_drops_the_content_fails_the_check_with_the_counts(tmp_path: Path) -> None:
    # llama-server takes "gemma" as the template's text: every prompt renders to a few tokens
    campaign = load_campaign(campaign_with_template(tmp_path, ""))
    (outcome,) = run_campaign(campaign)
    run = RunDir(campaign.campaign.results / "runs" / str(outcome.run_id))
    (record,) = list(run.records())
    assert record.error is not None and record.error.kind == "prompt_not_planned"
    assert record.error.message.startswith(f"server counted {record.usage.prompt_tokens} tokens, planned 384")
    row = evidence_row(campaign.campaign.results, run)
    assert row.status == "failed"
    assert row.reasons[0].startswith("1 prompt(s) were not what was planned, first: server counted ")
    assert any("chat template differs" in reason for reason in row.reasons)
    assert row.cell("retrieval").text.startswith("FAILS: 1 prompt(s) not as planned (server counted ")
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["chat_template"]["counter"] == "differs"
    assert (run.path / "chat_template.jinja").read_text() == "gemma"


def test_a_server_counter_whose_template_drops_the_content_is_refused_at_start(tmp_path: Path) -> None:
    campaign = load_campaign(campaign_with_template(tmp_path, 'tokenizer = "server"'))
    (outcome,) = run_campaign(campaign)
    assert outcome.status == "failed"
    assert "the chat template drops the message content" in str(outcome.error)
    run = RunDir(campaign.campaign.results / "runs" / str(outcome.run_id))
    assert list(run.records()) == []


def test_the_needle_command_counts_with_the_servers_tokenizer(
    spm_server: LlamaServer, tmp_path: Path
) -> None:
    command = [
        sys.executable, "-m", "ctxbench", "needle", "--url", spm_server.base_url, "--model", "tiny",
        "--tokenizer", "server", "--lengths", "512", "--depths", "0.5", "--results", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (log,) = list(tmp_path.glob("runs/*/niah.log"))
    assert "(planned 512, error +0)" in log.read_text()


def test_a_model_without_a_chat_template_is_named_as_running_on_llamacpps_default(
    llama_build: LlamaCppBuild, tmp_path: Path
) -> None:
    base = tiny_model(spec=TinyModelSpec(chat_template=False))
    config = LlamaServerConfig(binary=llama_build.server, model=base.gguf, ctx_size=2048, alias="base")
    with LlamaServer(config, tmp_path / "server.log") as server:
        entry, text = served_template("llamacpp", server.base_url, server.command, str(base.gguf), {})
    assert entry["fallback"] is True and text is not None and "<|im_start|>" in text  # ChatML, llama.cpp's
    assert template_warnings(entry)[0].startswith("the model has no chat template and none was given")
    own = LlamaServerConfig(binary=llama_build.server, model=tiny_model().gguf, ctx_size=2048)
    with LlamaServer(own, tmp_path / "own.log") as server:
        entry, _ = served_template("llamacpp", server.base_url, server.command, str(own.model), {})
    assert entry["fallback"] is False


def test_the_short_context_control_is_asked_first_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "control.toml"
    path.write_text(
        f"""
[campaign]
name = "control"
results = "{tmp_path / "results"}"

[checks.needle]
lengths = [1536]
depths = [0.5]
control = 512

[[deployments]]
name = "tiny-control"
engine = "llamacpp"
model = "ctxbench:tiny"
served_name = "tiny"
ctx_size = 4096
parallel = 2
"""
    )
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign)
    run = RunDir(campaign.campaign.results / "runs" / str(outcome.run_id))
    first, second = [r.labels for r in run.records()]
    assert (first.get("control"), first["length"], second["length"]) == ("1", "512", "1536")
    needle = json.loads((run.path / "needle.json").read_text())
    assert needle["control"]["length"] == 512 and list(needle["recall_by_length"]) == ["1536"]
    report = (run.path / "report.md").read_text()
    assert "- control, 512 tokens: found " in report
    row = evidence_row(campaign.campaign.results, run)
    # random weights all but always miss the control; then the grid's misses are not called a long-context
    # failure, and when they do not, nothing says they did
    missed = needle["control"]["found"] < needle["control"]["scored"]
    assert any("fails at the 512-token control too" in reason for reason in row.reasons) == missed
    assert ("no long-context verdict: fails at the short control" in report) == missed
    if missed:
        assert not any(reason.startswith("one-shot retrieval") for reason in row.reasons)


def test_a_campaign_whose_evidence_failed_says_so_and_exits_1(tmp_path: Path) -> None:
    path = campaign_with_template(tmp_path, "")
    done = subprocess.run(
        [sys.executable, "-m", "ctxbench", "run", str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stdout + done.stderr
    out = " ".join(done.stdout.split())  # the console wraps long lines
    assert "verdict: FAILED" in out
    assert "- 1 prompt(s) were not what was planned, first: server counted " in out
    assert "1 requests, 1 failed" in out and "over-limit" not in out  # no capacity check: no probe to excuse


def test_a_model_without_a_chat_template_counts_with_the_template_the_server_states(tmp_path: Path) -> None:
    # Issue 57: a base-model GGUF (no chat template) was refused at start ("has no chat template; count with
    # the server's tokenizer instead"), though llama-server states the template it renders with in /props.
    base = tiny_model(spec=TinyModelSpec(chat_template=False))
    path = tmp_path / "base.toml"
    path.write_text(
        f'[campaign]\nname = "base"\nresults = "{tmp_path / "results"}"\n'
        "[checks.needle]\nlengths = [512]\ndepths = [0.5]\n"
        f'[[deployments]]\nname = "tiny-base"\nengine = "llamacpp"\nmodel = "{base.gguf}"\n'
        "ctx_size = 2048\nparallel = 1\nrandom_weights = true\n"
    )
    campaign = load_campaign(path)
    (outcome,) = run_campaign(campaign)
    assert outcome.status == "done", outcome.error
    run = RunDir(campaign.campaign.results / "runs" / str(outcome.run_id))
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["chat_template"]["counted_with"] == "the server's template: the model has none"
    assert manifest["chat_template"]["counter"] == "same"
    (trial,) = json.loads((run.path / "needle.json").read_text())["trials"]
    assert trial["prompt_tokens"] == trial["planned_tokens"]  # counted right: the server saw what was planned
    assert "counted with the server's template" in (run.path / "report.md").read_text()
