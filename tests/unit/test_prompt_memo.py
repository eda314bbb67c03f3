"""A conversation's next prompt counted from where it leaves the last one (text/prompt_memo.py): exact at
every turn against the whole count, for both kinds of vocabulary, beside another conversation, and off
where the template has no special token to split at."""

from __future__ import annotations

import random

import pytest

from ctxbench.engines.models import TinyModelSpec, tiny_model
from ctxbench.text.gguf_vocab import gguf_token_counter
from ctxbench.text.haystack import Needle, UnitPool, build_haystack, request_seed
from ctxbench.text.tokens import HfTokenCounter


def counters() -> list[HfTokenCounter]:
    return [
        HfTokenCounter.from_path(tiny_model().tokenizer_dir),
        gguf_token_counter(tiny_model(spec=TinyModelSpec(vocabulary="sentencepiece")).gguf),
    ]


def whole(counter: HfTokenCounter, messages: tuple[dict[str, str], ...]) -> int:
    """The count without any memo: the rendered prompt tokenized whole."""
    bos, prompt = counter.rendered(messages)
    return bos + counter.count_rendered(prompt)


@pytest.mark.parametrize("counter", counters(), ids=["bpe", "sentencepiece"])
def test_every_turn_of_two_conversations_counts_as_the_whole_prompt(counter: HfTokenCounter) -> None:
    assert counter._memo.markers  # the template's special tokens split: the memo is on
    pool = UnitPool.generated(counter, units=1024)
    needle = Needle.random(random.Random(5))
    histories: dict[int, list[dict[str, str]]] = {0: [], 1: []}
    for turn, target in enumerate([2000, 6000, 15000, 40000], start=1):
        for user in (0, 1):  # the two conversations interleave, as two users' ramps do
            haystack = build_haystack(
                pool,
                target,
                request_seed("memo", user, turn),
                question=needle.question,
                history=histories[user],
                needle=needle,
                depth=0.5 if turn == 1 else None,
            )
            assert haystack.planned_tokens == target
            assert whole(counter, haystack.messages) == target, (user, turn)
            counter.remember(haystack.messages, target)
            reply = f"The code is {needle.value}. The archive holds letters from the harbour, turn {turn}."
            histories[user] = [*haystack.messages, {"role": "assistant", "content": reply}]


def test_a_prompt_that_continues_none_remembered_is_counted_whole() -> None:
    counter = counters()[0]
    pool = UnitPool.generated(counter, units=512)
    first = build_haystack(pool, 3000, 1, depth=0.5)
    counter.remember(first.messages, 3000 + 5)  # a wrong total, remembered for a prompt of its own
    other = build_haystack(pool, 3000, 2, depth=0.5)
    assert counter.count_chat(other.messages) == 3000  # another conversation: the memo is not used
    follow = (*first.messages, {"role": "assistant", "content": "Yes."}, {"role": "user", "content": "More?"})
    # a continuation is counted from the remembered total: the memo is used (and trusts what it was told)
    assert counter.count_chat(follow) == whole(counter, follow) + 5


def test_a_template_without_special_tokens_remembers_nothing() -> None:
    counter = counters()[0]
    plain = HfTokenCounter(
        counter._tokenizer,
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:",
        {},
        "plain",
    )
    assert plain._memo.markers == ()
    pool = UnitPool.generated(plain, units=512)
    first = build_haystack(pool, 2000, 3, depth=0.5)
    plain.remember(first.messages, 1)
    follow = (*first.messages, {"role": "assistant", "content": "Yes."}, {"role": "user", "content": "More?"})
    assert plain.count_chat(follow) == whole(plain, follow)


def test_a_counter_travels_to_a_client_process_without_its_prompts() -> None:
    import pickle

    counter = counters()[0]
    pool = UnitPool.generated(counter, units=512)
    first = build_haystack(pool, 2000, 4, depth=0.5)
    counter.remember(first.messages, 2000)
    copy = pickle.loads(pickle.dumps(counter))
    assert copy._memo.markers == counter._memo.markers and copy._memo._entries == []
    assert copy.count_chat(first.messages) == 2000
