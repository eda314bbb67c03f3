"""Prompts made of shared blocks, as a replayed trace's hash ids imply them.

A Mooncake-style trace names each request's prompt as a list of block hash ids (512 tokens a block in
Mooncake's traces): two requests that start with the same k ids share their first k blocks. Here every id is
one text of exactly `block_tokens` tokens, drawn from the id and the run's scope alone, wherever it appears;
a prompt is the chat template, one fixed lead line, its blocks in order, and a question. So two prompts
share exactly the template's opening, the lead and their common leading blocks, and a prefix cache can
serve that much of a prompt and no more. The last block of a prompt is cut to the prompt's length (its
`input_length`, template and question included).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .haystack import SEPARATOR, UnitPool, exact_body, request_seed
from .tokens import TokenCounter

LEAD = "Shared archive. Read it closely; a question follows at the end."
QUESTION = "In two sentences, what is this archive about?"


@dataclass(frozen=True)
class BlockPrompt:
    messages: tuple[dict[str, str], ...]
    planned_tokens: int
    full_blocks: int  # the leading blocks used whole (`block_tokens` each): the ones another prompt can share


def shortest_prompt(counter: TokenCounter) -> int:
    """Tokens of the shortest prompt a trace line can be sent as: the chat template around the lead and the
    question, with no block text. A line asking for fewer is sent at this length (`trace.json` counts them,
    `lengthened_requests`; the dry run warns)."""
    return counter.count_chat([{"role": "user", "content": LEAD + SEPARATOR + QUESTION}])


class BlockPrompts:
    """Token-exact prompts from hash ids; each whole block's text is made once and reused."""

    def __init__(self, pool: UnitPool, block_tokens: int, scope: Sequence[object]) -> None:
        self.pool = pool
        self.block_tokens = block_tokens
        self.scope = tuple(scope)
        self.overhead_tokens = shortest_prompt(pool.counter)
        self._whole: dict[int, tuple[list[str], list[int]]] = {}

    def _block(self, hash_id: int, budget: int) -> tuple[list[str], list[int]]:
        if budget == self.block_tokens and hash_id in self._whole:
            return self._whole[hash_id]
        rng = random.Random(request_seed(*self.scope, "block", hash_id))
        made = exact_body(self.pool, budget, rng)
        if budget == self.block_tokens:
            self._whole[hash_id] = made
        return made

    def prompt(self, hash_ids: Sequence[int], input_length: int, own_seed: int) -> BlockPrompt:
        """A prompt of `input_length` tokens: whole blocks for the leading ids that fit, the rest of the
        length from the next id's block (or, without ids, from `own_seed`)."""
        whole = len(hash_ids) - 1 if hash_ids else 0
        while whole > 0 and self.overhead_tokens + whole * self.block_tokens > input_length:
            whole -= 1
        rest = input_length - self.overhead_tokens - whole * self.block_tokens
        texts: list[str] = []
        counts: list[int] = []
        for hash_id in hash_ids[:whole]:
            body, body_counts = self._block(hash_id, self.block_tokens)
            texts += body
            counts += body_counts
        if rest > 0:
            if whole < len(hash_ids):
                body, body_counts = self._block(hash_ids[whole], rest)
            else:
                body, body_counts = exact_body(self.pool, rest, random.Random(own_seed))
            texts += body
            counts += body_counts
        content = LEAD + "".join(SEPARATOR + text for text in texts) + SEPARATOR + QUESTION
        return BlockPrompt(
            messages=({"role": "user", "content": content},),
            planned_tokens=self.overhead_tokens + sum(counts),
            full_blocks=whole,
        )
