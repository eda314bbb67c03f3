"""Trace replay's pieces: the Mooncake reader's errors, the prompts its hash ids make (token-exact, sharing
exactly their common leading blocks), and the cache hits a trace implies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.checks.trace.check import (
    TraceFileError,
    TraceRequest,
    expected_shared_blocks,
    read_trace,
    sample_trace,
)
from ctxbench.engines.models import tiny_model
from ctxbench.text.blocks import BlockPrompts
from ctxbench.text.haystack import UnitPool
from ctxbench.text.tokens import HfTokenCounter, render_template


@pytest.fixture(scope="module")
def counter() -> HfTokenCounter:
    return HfTokenCounter.from_path(tiny_model().tokenizer_dir)


@pytest.fixture(scope="module")
def blocks(counter: HfTokenCounter) -> BlockPrompts:
    return BlockPrompts(UnitPool.generated(counter, units=512), 64, ("test", "blocks"))


def ids_of(counter: HfTokenCounter, messages: tuple[dict[str, str], ...]) -> list[int]:
    """The prompt's token ids, rendered and encoded as `count_chat` counts them."""
    prompt = render_template(counter.chat_template, messages, counter._special)
    return counter._tokenizer.encode_batch([prompt], add_special_tokens=False)[0].ids


def test_prompts_are_token_exact_and_share_exactly_their_common_blocks(
    blocks: BlockPrompts, counter: HfTokenCounter
) -> None:
    length = blocks.overhead_tokens + 3 * 64 + 20
    a = blocks.prompt([1, 2, 3, 4], length, own_seed=1)
    b = blocks.prompt([1, 2, 9, 10], length, own_seed=2)
    for prompt in (a, b):
        assert counter.count_chat(prompt.messages) == prompt.planned_tokens == length
    assert a.full_blocks == b.full_blocks == 3  # the fourth id's block is cut to the length
    first, second = ids_of(counter, a.messages), ids_of(counter, b.messages)
    common = next(i for i, (x, y) in enumerate(zip(first, second, strict=False)) if x != y)
    # the template's opening and the lead, then blocks 1 and 2 (64 tokens each): shared, and no more
    opening = common - 2 * 64
    assert 0 < opening < blocks.overhead_tokens
    c = blocks.prompt([7, 8], length, own_seed=3)
    assert next(
        i for i, (x, y) in enumerate(zip(first, ids_of(counter, c.messages), strict=False)) if x != y
    ) == (opening)


def test_a_length_shorter_than_its_blocks_keeps_the_blocks_that_fit(blocks: BlockPrompts) -> None:
    prompt = blocks.prompt([1, 2, 3, 4, 5], blocks.overhead_tokens + 64 + 10, own_seed=4)
    assert prompt.full_blocks == 1 and prompt.planned_tokens == blocks.overhead_tokens + 74


def test_the_implied_hits_are_the_leading_whole_blocks_seen_before() -> None:
    requests = [
        TraceRequest(1, 0, 10, 1, (1, 2, 3)),
        TraceRequest(2, 1, 10, 1, (1, 2, 4)),  # shares 1, 2
        TraceRequest(3, 2, 10, 1, (5, 2, 3)),  # block 2 again, but not at the start: nothing
        TraceRequest(4, 3, 10, 1, (1, 2, 4, 6)),  # 1, 2, 4 whole in request 2? only 1, 2 were whole there
    ]
    assert list(expected_shared_blocks(requests, [2, 2, 2, 3])) == [0, 2, 0, 2]


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", r"trace.jsonl:2: not JSON"),
        ('{"timestamp": 5, "input_length": 0, "output_length": 3}', r"trace.jsonl:2: input_length is 0"),
        (
            '{"timestamp": "soon", "input_length": 9, "output_length": 3}',
            r"trace.jsonl:2: timestamp is 'soon'",
        ),
        ('{"timestamp": 5, "input_length": 9}', r"trace.jsonl:2: output_length is None"),
        (
            '{"timestamp": 5, "input_length": 9, "output_length": 3, "hash_ids": ["a"]}',
            r"trace.jsonl:2: hash_ids",
        ),
        ("[1, 2]", r"trace.jsonl:2: a line is a JSON object"),
    ],
)
def test_a_bad_trace_line_is_named_with_its_file_line_and_key(
    tmp_path: Path, line: str, message: str
) -> None:
    good = '{"timestamp": 0, "input_length": 9, "output_length": 3, "hash_ids": [1]}'
    with pytest.raises(TraceFileError, match=message):
        read_trace(write(tmp_path, good, line))


def test_the_trace_is_read_in_time_order_and_cut_at_max_requests(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"timestamp": 30, "input_length": 9, "output_length": 3}',
        "",
        '{"timestamp": 10, "input_length": 8, "output_length": 2, "hash_ids": [4]}',
        '{"timestamp": 20, "input_length": 7, "output_length": 1}',
    )
    assert [r.line for r in read_trace(path)] == [3, 4, 1]
    assert [r.line for r in read_trace(path, max_requests=2)] == [3, 1]
    with pytest.raises(TraceFileError, match="no requests"):
        read_trace(write(tmp_path, ""))


def test_the_shipped_sample_is_the_generator_s_and_has_returning_prefixes() -> None:
    shipped = Path(__file__).parents[2] / "examples" / "mooncake-sample.jsonl"
    lines = [json.loads(line) for line in shipped.read_text().splitlines()]
    assert lines == sample_trace()
    requests = read_trace(shipped)
    shared = list(expected_shared_blocks(requests, [len(r.hash_ids) - 1 for r in requests]))
    assert sum(1 for s in shared if s > 0) >= 6  # conversations that came back, documents read again
    assert any(s == 0 for s in shared)
