"""Fresh, token-exact haystacks with a planted fact.

How a 1M-token prompt is built in well under a second: corpus units (paragraphs) are tokenized
once per tokenizer (`UnitPool`); each request draws its own order of units from its own seed and
adds their known counts. A unit is tokenized with the blank line that precedes it, and units
end in punctuation, so with byte-level BPE tokenizers (GPT-2-style pre-tokenization) a unit's
tokens do not change at the seams. The last few tokens are filled with a truncated unit plus
single-token words. The count includes the chat template; what the server counted is compared
afterwards (`usage.prompt_tokens`) and the difference reported, never hidden.

Every prompt opens with a header naming its own seed (in letters), so two requests share no prefix
longer than the chat template's opening, and no prompt can be served from another's prefix cache.

A planted fact's value occurs nowhere else in the prompt: paragraphs that mention it (the prose has
years, a user's corpus any number or name) are not drawn, and the header has no digits. A model that echoes
some other passage cannot be scored a hit. What is planted and how an answer is scored is a retrieval task's
(`tasks.py`); this module places the task's sentences at their depths.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import HaystackError
from .corpus import FIRST_NAMES, OBJECTS, PLACES, TRADES, ProseGenerator
from .tasks import Fact, Knobs, Planted, Question, numbers_in, task_named, words_in
from .tokens import TokenCounter

SEPARATOR = "\n\n"


def request_seed(*parts: object) -> int:
    """A seed derived from (campaign, deployment, check, request index, ...): never a reused global seed."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class Needle:
    """A hidden fact with a random value, and the question that asks for it."""

    sentence: str
    question: str
    value: str

    @classmethod
    def random(cls, rng: random.Random) -> Needle:
        """The `single` task's fact (`tasks.plant`), drawn from `rng`."""
        single = task_named("single").plant(rng, (0.5,), Knobs())
        return cls(single.facts[0].sentence, single.questions[0].text, single.questions[0].expected[0])

    def found_in(self, answer: str) -> bool:
        """The `single` task's scoring: the value as one whole number in the answer."""
        return Question(self.question, (self.value,)).score(answer)


class UnitPool:
    """Corpus units with their token counts (each counted with the blank line before it), made once."""

    def __init__(
        self, texts: Sequence[str], counts: Sequence[int], counter: TokenCounter, origin: str
    ) -> None:
        if not texts:
            raise HaystackError(
                f"the corpus {origin} has no paragraphs; give a directory of non-empty .txt files."
            )
        self.texts = list(texts)
        self.counts = list(counts)
        self.counter = counter
        self.origin = origin
        self.single_token_words = self._find_single_token_words()
        self._numbers: list[set[str]] | None = None
        self._words: list[set[str]] | None = None

    def without(self, values: Sequence[str]) -> list[int]:
        """Indices of the units that mention none of `values`: whole numbers, or names (any of whose words
        the unit has, in any case)."""
        numbers = {v for v in values if v.isdigit()}
        words = {w for v in values if not v.isdigit() for w in words_in(v)}
        if numbers and self._numbers is None:  # once per pool: a 1M-token turn checks 16384 units in 1 ms
            self._numbers = [numbers_in(text) for text in self.texts]
        if words and self._words is None:
            self._words = [words_in(text) for text in self.texts]
        by_number, by_word = self._numbers or [], self._words or []
        return [
            i
            for i in range(len(self.texts))
            if not (numbers and numbers & by_number[i]) and not (words and words & by_word[i])
        ]

    @classmethod
    def generated(cls, counter: TokenCounter, units: int = 16384, seed: str = "ctxbench-corpus") -> UnitPool:
        """Paragraphs of the built-in prose generator (2-4 sentences each)."""
        prose = ProseGenerator(seed)
        texts = [" ".join(prose.sentence() for _ in range(2 + i % 3)) for i in range(units)]
        return cls(texts, counter.count_many([SEPARATOR + t for t in texts]), counter, f"generated:{seed}")

    @classmethod
    def from_directory(cls, counter: TokenCounter, directory: Path) -> UnitPool:
        """Paragraphs (blank-line separated) of every `.txt` file under `directory`."""
        if not directory.is_dir():
            raise HaystackError(f"corpus directory {directory} does not exist.")
        texts = []
        for file in sorted(directory.rglob("*.txt")):
            for paragraph in file.read_text(errors="replace").split("\n\n"):
                cleaned = " ".join(paragraph.split())
                if cleaned:
                    texts.append(cleaned if cleaned[-1] in ".!?\"'" else cleaned + ".")
        if not texts:
            raise HaystackError(
                f"corpus directory {directory} holds no .txt file with text; add some or omit it."
            )
        return cls(texts, counter.count_many([SEPARATOR + t for t in texts]), counter, f"dir:{directory}")

    def _find_single_token_words(self) -> list[str]:
        words = sorted({w.split()[0] for w in (*FIRST_NAMES, *PLACES, *TRADES, *OBJECTS)})
        candidates = [" " + w for w in words]
        return [c for c, n in zip(candidates, self.counter.count_many(candidates), strict=True) if n == 1]


def pool_for(counter: TokenCounter, longest_tokens: int, corpus: Path | None = None) -> UnitPool:
    """A unit pool big enough that a haystack of `longest_tokens` rarely repeats a paragraph
    (about 60 tokens a unit, 512 to 16384 units), or the user's own corpus."""
    if corpus is not None:
        return UnitPool.from_directory(counter, corpus)
    return UnitPool.generated(counter, units=min(16384, max(512, longest_tokens // 50)))


@dataclass(frozen=True)
class Haystack:
    """One chat request's messages, the tokens planned for it, and where the needle sits."""

    messages: tuple[dict[str, str], ...]
    target_tokens: int
    planned_tokens: int
    seed: int
    needle: Needle | None
    depth: float | None
    needle_token_offset: int | None
    overhead_tokens: int  # template, history, header and question: everything but the new document
    tokenizer_source: str
    corpus: str
    planted: Planted | None = None  # the retrieval task's plan (its facts and every question)
    question: Question | None = None  # the question this prompt ends with, and how its answer is scored

    @property
    def shortfall(self) -> int:
        """Tokens the builder could not place exactly (0 when exact, as the tests require)."""
        return self.target_tokens - self.planned_tokens


def build_haystack(
    pool: UnitPool,
    target_tokens: int,
    seed: int,
    *,
    depth: float | None = None,
    question: str | None = None,
    history: Sequence[Mapping[str, str]] = (),
    needle: Needle | None = None,
) -> Haystack:
    """A chat prompt of `target_tokens` tokens (template and `history` included), unique to `seed`.

    With `depth` in [0, 1], `needle` (or a random one from the seed) is planted at the paragraph
    boundary nearest that fraction of the new document. The prompt ends with `question`, else the
    needle's question, else a generic one.
    `history` (earlier turns of a conversation) is kept as is; the new user message fills the rest.
    """
    if depth is not None and not 0.0 <= depth <= 1.0:
        raise HaystackError(
            f"depth {depth} is outside [0, 1]; depths are fractions of the document (0.5 = middle)."
        )

    drawn: list[Needle] = []

    def plan(rng: random.Random) -> Planted:
        if depth is None:  # nothing planted; a given needle's value is still kept out of the text
            ask = question or "In two sentences, what is this archive about?"
            return Planted("single", (), (Question(ask, ()),), (needle.value,) if needle else ())
        fact = needle or Needle.random(rng)  # drawn first from the seed, as it always was
        drawn.append(fact)
        asked = Question(question or fact.question, (fact.value,))
        return Planted("single", (Fact(fact.sentence, depth),), (asked,), (fact.value,))

    (haystack,) = build_planted(pool, target_tokens, seed, plan, history=history)
    return dataclasses.replace(haystack, needle=drawn[0] if drawn else None)


def build_planted(
    pool: UnitPool,
    target_tokens: int,
    seed: int,
    plan: Callable[[random.Random], Planted],
    *,
    history: Sequence[Mapping[str, str]] = (),
    suffix: str = "",
) -> list[Haystack]:
    """One prompt per question of the plan `plan(rng)` draws from the seed, over one fresh document of
    `target_tokens` tokens (less for a question shorter than the longest) holding the plan's sentences at
    their depths. Each question (with `suffix` after it) ends its own prompt; the document before it is the
    same in all, so a second question can read it from a prefix cache (`multi_depth`)."""
    rng = random.Random(seed)
    planted = plan(rng)
    header = _header(seed)
    counter = pool.counter
    earlier = [dict(m) for m in history]
    asks = [(q.text + suffix).strip() for q in planted.questions]
    empties = [
        counter.count_chat([*earlier, {"role": "user", "content": header + SEPARATOR + ask}]) for ask in asks
    ]
    fact_tokens = counter.count_many([SEPARATOR + f.sentence for f in planted.facts]) if planted.facts else []
    budget = target_tokens - max(empties) - sum(fact_tokens)
    if budget < 0:
        raise HaystackError(
            f"{target_tokens} tokens is too short: the template, history, header and question "
            f"take {max(empties) + sum(fact_tokens)}."
        )
    body, counts = exact_body(pool, budget, rng, avoid=planted.avoid)
    offsets = _insert(body, counts, planted.facts, fact_tokens)
    document = header + "".join(SEPARATOR + text for text in body)
    first = planted.facts[0] if planted.facts else None
    return [
        Haystack(
            messages=(*earlier, {"role": "user", "content": document + SEPARATOR + ask}),
            target_tokens=target_tokens,
            planned_tokens=empty + sum(counts),
            seed=seed,
            needle=None,
            depth=first.depth if first else None,
            needle_token_offset=empty + offsets[0] if offsets else None,
            overhead_tokens=empty,
            tokenizer_source=counter.source,
            corpus=pool.origin,
            planted=planted,
            question=q,
        )
        for ask, empty, q in zip(asks, empties, planted.questions, strict=True)
    ]


def _insert(
    body: list[str], counts: list[int], facts: Sequence[Fact], fact_tokens: Sequence[int]
) -> list[int]:
    """Put each fact at the paragraph boundary nearest its depth of the document as drawn; returns each
    fact's token offset in the document (after the header)."""
    positions = list(itertools.accumulate(counts, initial=0))
    places = [
        min(bisect.bisect_left(positions, f.depth * positions[-1]) if positions[-1] else 0, len(body))
        for f in facts
    ]
    # from the last place back, so earlier places keep their index; facts at one place keep their order
    for index in sorted(range(len(facts)), key=lambda i: (places[i], i), reverse=True):
        body.insert(places[index], facts[index].sentence)
        counts.insert(places[index], fact_tokens[index])
    order = sorted(range(len(facts)), key=lambda i: (places[i], i))
    offsets = [0] * len(facts)
    for rank, index in enumerate(order):
        before = sum(fact_tokens[j] for j in order[:rank])
        offsets[index] = positions[places[index]] + before
    return offsets


def _header(seed: int) -> str:
    """The seed in letters, not digits: a number in the header could be a planted value's double."""
    letters = "".join(chr(ord("a") + (seed >> (4 * i)) % 16) for i in range(16))
    return f"Archive file {letters}. Read it closely; a question follows at the end."


HEADER_LEAD = "Archive file"  # the first words of every document's header (`_header`)


def lead_tokens(
    counter: TokenCounter, history: Sequence[Mapping[str, str]] = (), lead: str = HEADER_LEAD
) -> int:
    """The lead that prompts beginning with `history` and then a user message starting with `lead` all share,
    so the most of a fresh one that a prefix cache may serve: the template around a message holding only
    the lead (its closing tokens counted too, so a bound a few tokens over). A request's `CacheIntent`."""
    return counter.count_chat([*(dict(m) for m in history), {"role": "user", "content": lead}])


def turn_overhead_tokens(
    pool: UnitPool, seed: int, question: str, history: Sequence[Mapping[str, str]] = ()
) -> int:
    """The tokens of `build_haystack(pool, n, seed, question=question, history=history)` before any new
    document text: the history, the template, the header and the question. A turn of this plus N tokens
    adds N tokens of fresh document."""
    message = {"role": "user", "content": _header(seed) + SEPARATOR + question}
    return pool.counter.count_chat([*(dict(m) for m in history), message])


def exact_body(
    pool: UnitPool, budget: int, rng: random.Random, avoid: Sequence[str] = ()
) -> tuple[list[str], list[int]]:
    """Paragraphs (each to be joined after a SEPARATOR) of `budget` tokens together, in an order drawn from
    `rng`, and each one's count: exact unless the tokenizer leaves a shortfall (then the counts say so).
    No paragraph mentions a value of `avoid` (the planted values)."""
    usable = pool.without(avoid)
    if not usable:
        raise HaystackError(
            f"every paragraph of the corpus {pool.origin} mentions one of {', '.join(avoid)}; add other text."
        )
    chosen, used = _draw_units(pool, usable, budget, rng)
    body = [pool.texts[i] for i in chosen]
    counts = [pool.counts[i] for i in chosen]
    _fill(pool, usable, budget - used, rng, body, counts)
    return body, counts


def _draw_units(pool: UnitPool, usable: list[int], budget: int, rng: random.Random) -> tuple[list[int], int]:
    """Indices from `usable` in a fresh random order, as many as fit in `budget` tokens."""
    chosen: list[int] = []
    used = 0
    order: list[int] = []
    while True:
        if not order:
            order = list(usable)
            rng.shuffle(order)
        index = order.pop()
        if used + pool.counts[index] > budget:
            return chosen, used
        chosen.append(index)
        used += pool.counts[index]


def _fill(
    pool: UnitPool, usable: list[int], remainder: int, rng: random.Random, body: list[str], counts: list[int]
) -> None:
    """Add exactly `remainder` tokens: a truncated unit (from `usable`) if one fits, then one-token words
    (" Lisbon") appended to the last unit. Each such word is its own pre-token after a word or punctuation."""
    if remainder <= 0:
        return
    words = pool.texts[usable[rng.randrange(len(usable))]].split(" ")
    # The longest prefix of whole words that fits, by bisection: a prefix's count grows with its words, and
    # each count asked for is exact, so a tokenizer where it does not grow only leaves more one-token words
    # to append. (Counting every prefix cost O(words^2) tokens: most of a short prompt's build time.)
    best, best_count = 0, 0
    low, high = 1, len(words)
    while low <= high:
        middle = (low + high) // 2
        count = pool.counter.count_many([SEPARATOR + " ".join(words[:middle])])[0]
        if count <= remainder:
            best, best_count, low = middle, count, middle + 1
        else:
            high = middle - 1
    if best:
        body.append(" ".join(words[:best]))
        counts.append(best_count)
        remainder -= best_count
    fillers = pool.single_token_words
    if remainder <= 0 or not fillers or not body:
        return  # anything left is reported as the haystack's shortfall
    body[-1] += "".join(rng.choice(fillers) for _ in range(remainder))
    counts[-1] += remainder
