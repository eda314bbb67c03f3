"""What a real model needs (issue 38), without a server: the prompt-as-planned tolerance, the refusal of a
template that drops the content, the chat template's source, the dry run's counter and fit warnings, the
SentencePiece counter's own rules (space prefix after specials, one BOS) and the short-context control."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.campaigns.preflight import describe_counter, dry_run, fit_warnings
from ctxbench.checks.needle import NeedleParams
from ctxbench.checks.needle.file import Control
from ctxbench.client.answers import unplanned_prompt
from ctxbench.engines.chat_template import compare_with_counter, served_template, template_warnings
from ctxbench.engines.models import TinyModelSpec, tiny_model
from ctxbench.errors import TokenizerError
from ctxbench.records import Usage
from ctxbench.text.gguf_vocab import SentencePieceCounter, gguf_token_counter
from ctxbench.text.tokens import load_token_counter, require_content_counted


@pytest.mark.parametrize(
    ("planned", "served", "fails"),
    [
        (512, 512, False),
        (512, 520, False),  # 8 tokens of template whitespace
        (512, 521, True),
        (512, 504, False),
        (512, 503, True),
        (2048, 3, True),
        (100000, 101000, False),  # 1% of a long prompt
        (100000, 101001, True),
        (None, 3, False),  # nothing planned (a prompt from a file): nothing to hold it to
    ],
)
def test_a_prompt_far_from_the_planned_count_is_a_failed_request(
    planned: int | None, served: int, fails: bool
) -> None:
    error = unplanned_prompt(planned, Usage(prompt_tokens=served))
    assert (error is not None) == fails
    if error is not None:
        assert error.kind == "prompt_not_planned"
        assert error.message.startswith(f"server counted {served} tokens, planned {planned}")


def test_no_usage_is_no_verdict_on_the_prompt() -> None:
    assert unplanned_prompt(2048, None) is None and unplanned_prompt(2048, Usage()) is None


class _Counter:
    source = "fake"
    chat_template = None

    def __init__(self, grows: bool) -> None:
        self.grows = grows

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def count_chat(self, messages: Sequence[dict[str, str]]) -> int:
        return 3 + (len(messages[-1]["content"].split()) if self.grows else 0)

    def close(self) -> None:
        pass


def test_a_counter_whose_chat_count_does_not_grow_with_the_content_is_refused() -> None:
    require_content_counted(_Counter(grows=True))
    with pytest.raises(TokenizerError, match="the chat template drops the message content"):
        require_content_counted(_Counter(grows=False))


def test_tokenizer_server_needs_a_server_url() -> None:
    with pytest.raises(TokenizerError, match="no server URL"):
        load_token_counter("server", None, None, "m")


@pytest.fixture(scope="module")
def spm() -> SentencePieceCounter:
    counter = gguf_token_counter(tiny_model(spec=TinyModelSpec(vocabulary="sentencepiece")).gguf)
    assert isinstance(counter, SentencePieceCounter)
    return counter


def test_a_sentencepiece_chat_prompt_has_one_bos_and_a_space_after_each_special_token(
    spm: SentencePieceCounter,
) -> None:
    message = [{"role": "user", "content": "hello there"}]
    # <s> <|im_start|> "▁user\n..." <|im_end|> "▁\n" <|im_start|> "▁assistant\n": llama.cpp's rules
    fragments = [" user\nhello there", " \n", " assistant\n"]
    assert spm.count_chat(message) == 1 + 3 + sum(spm.count_many(fragments))
    # a BOS the template writes itself is not a second one
    spm.chat_template = "{{ bos_token }}" + str(spm.chat_template)
    try:
        assert spm.count_chat(message) == 1 + 3 + sum(spm.count_many(fragments))
    finally:
        spm.chat_template = str(spm.chat_template).removeprefix("{{ bos_token }}")


def test_a_vocabulary_ctxbench_cannot_read_names_the_way_out(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "wordpiece.gguf"
    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_tokenizer_model("bert")
    writer.add_token_list(["[UNK]", "a"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(TokenizerError, match=r"'bert' vocabulary.*tokenizer = \"server\""):
        gguf_token_counter(path)


def test_the_template_a_vllm_deployment_uses_comes_from_its_flag_or_its_model(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "{{ messages }}"}')
    entry, text = served_template("vllm", "http://127.0.0.1:9", ["vllm", "serve"], str(tmp_path), {})
    assert text == "{{ messages }}" and entry["source"].endswith("tokenizer_config.json chat_template")
    assert entry["fallback"] is False
    given = tmp_path / "t.jinja"
    given.write_text("mine")
    entry, text = served_template(
        "vllm", "http://127.0.0.1:9", ["--chat-template", str(given)], str(tmp_path), {}
    )
    assert text == "mine" and entry["source"] == f"--chat-template {given}"
    compare_with_counter(entry, text, "other")
    assert entry["counter"] == "differs" and any("differs" in w for w in template_warnings(entry))


def test_a_server_that_says_nothing_of_its_template_is_not_reported() -> None:
    entry, text = served_template("external", "http://127.0.0.1:9", [], "m", {})
    assert text is None and entry["source"] is None and entry["note"].startswith("not reported")
    assert template_warnings(entry) == []


def test_the_control_runs_first_at_each_depth_and_only_when_shorter_than_the_grid() -> None:
    assert NeedleParams(lengths=[4096]).control_length() == 1024
    assert NeedleParams(lengths=[512, 4096]).control_length() is None
    assert NeedleParams(lengths=[4096], control=0).control_length() is None
    assert NeedleParams(lengths=[4096], control="2K").trial_count() == 3 + 3
    assert Control(length=1024, found=2, scored=3).missed
    assert not Control(length=1024, found=3, scored=3).missed
    assert not Control(length=1024, found=0, scored=0).missed  # nothing scored: nothing known


CAMPAIGN = """
[campaign]
name = "fit"
results = "{results}"

[checks.needle]
lengths = [1536, "2K"]

[checks.ramp]
start = 512
end = "4K"
turns = 2

[[deployments]]
name = "small-slots"
engine = "llamacpp"
model = "ctxbench:tiny"
ctx_size = 4096
parallel = 2
tokenizer = "{tokenizer}"
"""


def test_the_dry_run_names_the_counter_the_results_and_what_will_not_fit(tmp_path: Path) -> None:
    path = tmp_path / "fit.toml"
    path.write_text(CAMPAIGN.format(results=tmp_path / "r", tokenizer="server"))
    campaign = load_campaign(path)
    (deployment,) = campaign.deployments
    warnings = fit_warnings(deployment, campaign.checks_for(deployment))
    assert warnings == [
        "needle length 2048 + 32 output tokens does not fit the 2048-token slot: it will be skipped (a "
        "shorter length, or a larger context per slot)",
        "ramp end 4096 + 256 output tokens does not fit the 2048-token slot: its last turns will be refused",
    ]
    lines = dry_run(campaign, [], tmp_path / "elsewhere")
    assert lines[0].endswith(f"results in {tmp_path / 'elsewhere'}")
    assert "  tokenizer: the server's own /tokenize (chosen), reached once the server is up" in lines
    assert sum(line.startswith("  warning: ") for line in lines) == 2


def test_the_dry_run_says_when_a_named_tokenizer_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    path = tmp_path / "fit.toml"
    path.write_text(CAMPAIGN.format(results=tmp_path / "r", tokenizer=tmp_path / "broken"))
    campaign = load_campaign(path, check_paths=False)
    (deployment,) = campaign.deployments
    assert describe_counter(deployment, "unused").startswith("CANNOT BE READ: no tokenizer.json at ")


def test_the_dry_run_says_when_a_listed_gpu_is_not_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxbench.campaigns.preflight

    path = tmp_path / "gpus.toml"
    path.write_text(CAMPAIGN.format(results=tmp_path / "r", tokenizer="server") + "gpus = [0, 1]\n")
    monkeypatch.setattr(ctxbench.campaigns.preflight, "available_gpus", lambda: 1)
    lines = dry_run(load_campaign(path), [])
    assert any(
        line.startswith(
            "  warning: deployments[0].gpus (small-slots): GPU 1 is not present; this machine shows 1"
        )
        and line.endswith("(a run refuses it)")
        for line in lines
    ), lines
