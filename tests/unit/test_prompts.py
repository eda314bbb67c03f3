"""Prompt sources of the many-users check: the user's JSONL file, and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.checks.prompts import read_prompts
from ctxbench.errors import PromptSourceError
from ctxbench.text.code import CodeGenerator


def test_prompts_file_takes_prompt_or_messages_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "hello"}\n\n{"messages": [{"role": "user", "content": "hi"}]}\n')
    assert read_prompts(path) == [[{"role": "user", "content": "hello"}], [{"role": "user", "content": "hi"}]]


SHAREGPT = [
    {"id": "a", "conversations": [{"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi there"}]},
    {"conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "why?"}]},
]


def test_sharegpt_files_are_read_as_vllm_and_sglang_read_them(tmp_path: Path) -> None:
    # Issue 51: the ShareGPT file `vllm bench serve` and SGLang read (a JSON array) was refused.
    import json

    array, lines = tmp_path / "sharegpt.json", tmp_path / "sharegpt.jsonl"
    array.write_text(json.dumps(SHAREGPT))
    lines.write_text("".join(json.dumps(entry) + "\n" for entry in SHAREGPT))
    expected = [
        [{"role": "user", "content": "hello"}],
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why?"}],
    ]
    assert read_prompts(array) == read_prompts(lines) == expected


def test_sharegpt_entries_are_kept_or_skipped_by_vllms_rule(tmp_path: Path) -> None:
    # Issue 69: a real ShareGPT .json holds conversations of one turn and empty ones; vLLM's loader keeps
    # those of 2 turns or more and reads the first turn; ctxbench refused the whole file at the first one.
    import json

    from ctxbench.checks.prompts import read_prompt_file
    from ctxbench.config.load_params import ThroughputParams

    entries = [
        *SHAREGPT,
        {"id": "empty", "conversations": []},
        {"id": "one", "conversations": [{"from": "human", "value": "alone"}]},
        {
            "id": "bot first",
            "conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "and?"}],
        },
        {"id": "no human", "conversations": [{"from": "gpt", "value": "a"}, {"from": "gpt", "value": "b"}]},
    ]
    path = tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json"
    path.write_text(json.dumps(entries))
    read = read_prompt_file(path)
    assert read.prompts == [
        [{"role": "user", "content": "hello"}],
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why?"}],
        [{"role": "user", "content": "and?"}],  # the first human turn is the prompt
    ]
    assert read.skipped == 3 and read.text("s.json").startswith(
        "3 from s.json (3 ShareGPT conversation(s) skipped"
    )
    assert ThroughputParams(source=str(path)).source == str(
        path
    )  # a .json source is taken, as vllm bench takes it
    with pytest.raises(ValueError, match=r"a \.jsonl or \.json file"):
        ThroughputParams(source="prompts.txt")


def test_messages_whose_content_is_a_list_of_text_parts_are_sent_as_their_text(tmp_path: Path) -> None:
    # Issue 69: OpenAI content parts (vLLM, SGLang and llama.cpp take them) were refused.
    path = tmp_path / "parts.jsonl"
    path.write_text(
        '{"messages": [{"role": "system", "content": [{"type": "text", "text": "be brief"}]}, '
        '{"role": "user", "content": [{"type": "text", "text": "first"}, '
        '{"type": "text", "text": "second"}]}]}\n'
    )
    assert read_prompts(path) == [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first\nsecond"}]
    ]


@pytest.mark.parametrize(
    "text, words",
    [
        ("not json\n", ":1: not JSON"),
        ('{"text": "x"}\n', ':1: needs a "prompt"'),
        ("\n", "no prompts"),
        # the server answers HTTP 400 "All non-assistant messages must contain 'content'": named here first
        ('{"prompt": "ok"}\n{"messages": [{"role": "user"}]}\n', r':2: messages\[0\] needs a "role" and a'),
        # every ShareGPT entry skipped (fewer than 2 turns, or no human turn): nothing to send, said so
        ('[{"conversations": [{"from": "gpt", "value": "x"}]}]', r"no prompts in the file \(1 ShareGPT"),
        (
            '[{"conversations": [{"from": "bot", "value": "x"}, {"from": "human", "value": "y"}]}]',
            r'conversations\[0\] needs "from"',
        ),
        (
            '[{"conversations": [{"from": ["human"], "value": "x"}, {"from": "gpt", "value": "y"}]}]',
            r'conversations\[0\] needs "from"',
        ),
        (
            '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}\n',
            r"content\[0\] is a 'image_url' part",
        ),
        (
            '{"messages": [{"role": "user", "content": []}]}\n',
            r'messages\[0\] needs a "role" and a "content"',
        ),
    ],
)
def test_bad_prompts_files_name_the_file_and_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(PromptSourceError, match=words):
        read_prompts(path)
    with pytest.raises(PromptSourceError, match="cannot read"):
        read_prompts(tmp_path / "absent.jsonl")


def test_code_snippets_are_valid_python_and_seeded() -> None:
    first, second = CodeGenerator("s"), CodeGenerator("s")
    snippets = [first.snippet() for _ in range(3)]
    assert snippets == [second.snippet() for _ in range(3)] and len(set(snippets)) == 3
    generator = CodeGenerator(7)
    for _ in range(50):
        compile(generator.snippet(), "<snippet>", "exec")


@pytest.mark.parametrize("source", ["prose", "code"])
def test_generated_prompts_are_token_exact_whatever_their_source(source: str) -> None:
    # code snippets were counted without the blank line that joins them: 8 to 10 tokens over at 1024
    from ctxbench.checks.prompts import PromptMaker
    from ctxbench.config.load_params import ThroughputParams
    from ctxbench.engines.models import tiny_model
    from ctxbench.text.haystack import UnitPool
    from ctxbench.text.tokens import HfTokenCounter

    counter = HfTokenCounter.from_path(tiny_model().tokenizer_dir)
    pool = UnitPool.generated(counter, units=512)
    maker = PromptMaker(ThroughputParams(source=source, prompt_tokens=1024), pool, counter, ("t", source))
    for index in range(4):
        messages, planned = maker(index, index)
        assert planned == 1024 and counter.count_chat(messages) == 1024
