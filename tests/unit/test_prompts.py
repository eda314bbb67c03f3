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


@pytest.mark.parametrize(
    "text, words",
    [
        ("not json\n", ":1: not JSON"),
        ('{"text": "x"}\n', ':1: needs a "prompt"'),
        ("\n", "no prompts"),
        # the server answers HTTP 400 "All non-assistant messages must contain 'content'": named here first
        ('{"prompt": "ok"}\n{"messages": [{"role": "user"}]}\n', r':2: messages\[0\] needs a "role" and a'),
        ('[{"conversations": [{"from": "gpt", "value": "x"}]}]', r"p.jsonl\[0\]: the conversation has no"),
        ('[{"conversations": [{"from": "bot", "value": "x"}]}]', r'conversations\[0\] needs "from"'),
        ('[{"conversations": [{"from": ["human"], "value": "x"}]}]', r'conversations\[0\] needs "from"'),
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
