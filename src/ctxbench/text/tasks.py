"""Retrieval tasks: what is planted in a fresh document, what is asked, and how an answer is scored, each task
in one place.

- `single`: one literal fact ("The access code for the Lisbon archive is 4821."), asked back in the same
  words. The seed's needle; exact match of the whole number.
- `multi_depth`: a distinct fact at every listed depth of one document, asked one question per fact in turn
  over the same (cached) document. One prefill serves them all, so the figures are not those of separate
  prompts: later questions read the document from the cache, and each answer is scored on its own.
- `multi_key`: the fact among `distractors` facts of the same form with other keys and values (RULER's
  multi-key needle); answering a distractor's value is a miss.
- `multi_value`: one key with `values` values at different depths; every value must come back (RULER's
  multi-value needle).
- `variable_tracking`: a chain of `hops` assignments (VAR A = 73914, VAR B = A, ...) spread through the
  document beside a distractor chain of the same length with another value; every name bound to the value
  must come back and none of the other chain's (RULER's variable tracking).
- `non_literal`: the fact and its question share no content word; answering needs one step of world
  knowledge (NoLiMa's idea: "Yuki lives next to the Semper Opera House" / "Which character has been to
  Dresden?"). The pairs are `NON_LITERAL`, written for ctxbench, each with the public source of its
  association.

Every value planted is kept out of the rest of the document (`Planted.avoid`): no drawn paragraph mentions
it, so an answer that names it can only have read the planted sentence.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..labels import Labels
from .corpus import PLACES

TaskName = Literal["single", "multi_depth", "multi_key", "multi_value", "variable_tracking", "non_literal"]
TASKS: tuple[TaskName, ...] = get_args(TaskName)  # in this order: each is one `Task` below
SUBJECTS = ("archive", "harbour office", "observatory", "seed vault", "printing house", "signal station")


@dataclass(frozen=True)
class Fact:
    """A sentence planted at `depth` (a fraction of the new document)."""

    sentence: str
    depth: float


@dataclass(frozen=True)
class Question:
    """What is asked, what must come back (every item of `expected`) and what must not (`forbidden`: a
    distractor's value, the other chain's names). Items are whole numbers or whole words (`words`)."""

    text: str
    expected: tuple[str, ...]
    forbidden: tuple[str, ...] = ()
    words: bool = False  # match whole words, any case (names); else whole numbers

    def score(self, answer: str) -> bool:
        """Every expected item in the answer and no forbidden one."""
        if self.words:
            found = words_in(answer)
            expected, forbidden = {x.lower() for x in self.expected}, {x.lower() for x in self.forbidden}
        else:
            found, expected, forbidden = numbers_in(answer), set(self.expected), set(self.forbidden)
        return expected <= found and not forbidden & found


@dataclass(frozen=True)
class Planted:
    """One task's plan for one document: its facts and its questions (one, or one per fact for
    `multi_depth`), and every value no other paragraph may mention."""

    task: TaskName
    facts: tuple[Fact, ...]
    questions: tuple[Question, ...]
    avoid: tuple[str, ...]


def numbers_in(text: str) -> set[str]:
    """Every whole number written in `text` (its runs of digits): "1234" is not in "12345" nor in "1,234"."""
    return set("".join(c if c.isdigit() else " " for c in text).split())


def words_in(text: str) -> set[str]:
    """Every whole word of `text`, lower case."""
    return {w.lower() for w in re.findall(r"[A-Za-z0-9]+", text)}


@dataclass(frozen=True)
class Association:
    """A non-literal pair: the fact names `landmark`; the question names `city`, which the landmark is in."""

    landmark: str
    city: str
    source: str


# Written for ctxbench; each landmark is in the city by the cited article. No content word of the fact
# ("Actually, NAME lives next to the LANDMARK.") is in the question ("Which character has been to CITY?"),
# and no city is one of the generated prose's places.
NON_LITERAL: tuple[Association, ...] = (
    Association("Semper Opera House", "Dresden", "https://en.wikipedia.org/wiki/Semperoper"),
    Association("Kiasma museum", "Helsinki", "https://en.wikipedia.org/wiki/Kiasma"),
    Association("Sagrada Familia", "Barcelona", "https://en.wikipedia.org/wiki/Sagrada_Fam%C3%ADlia"),
    Association("Brandenburg Gate", "Berlin", "https://en.wikipedia.org/wiki/Brandenburg_Gate"),
    Association("Rijksmuseum", "Amsterdam", "https://en.wikipedia.org/wiki/Rijksmuseum"),
    Association("Colosseum", "Rome", "https://en.wikipedia.org/wiki/Colosseum"),
    Association("Alhambra", "Granada", "https://en.wikipedia.org/wiki/Alhambra"),
    Association("Charles Bridge", "Prague", "https://en.wikipedia.org/wiki/Charles_Bridge"),
    Association("Petronas Towers", "Kuala Lumpur", "https://en.wikipedia.org/wiki/Petronas_Towers"),
    Association("CN Tower", "Toronto", "https://en.wikipedia.org/wiki/CN_Tower"),
    Association("Space Needle", "Seattle", "https://en.wikipedia.org/wiki/Space_Needle"),
    Association("Hermitage Museum", "Saint Petersburg", "https://en.wikipedia.org/wiki/Hermitage_Museum"),
)
# Characters of the non-literal task: none is a name the generated prose uses.
CHARACTERS = ("Yuki", "Stuart", "Katie", "Diego", "Mandla", "Aroha", "Gideon", "Noor", "Caspian", "Linnea")


def _keys(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """`n` distinct (place, subject) keys."""
    return rng.sample([(p, s) for p in PLACES for s in SUBJECTS], n)


def _values(rng: random.Random, n: int, digits: int = 4) -> list[str]:
    """`n` distinct whole numbers of `digits` digits."""
    return [str(v) for v in rng.sample(range(10 ** (digits - 1), 10**digits), n)]


def _code(key: tuple[str, str], value: str) -> str:
    return f"The access code for the {key[0]} {key[1]} is {value}."


def _ask_code(key: tuple[str, str]) -> str:
    return f"What is the access code for the {key[0]} {key[1]}? Answer with the code only."


def _name(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5))
        if name not in taken:
            taken.add(name)
            return name


@dataclass(frozen=True)
class Knobs:
    """A task's knobs, from its check's parameters: `distractors` (multi_key), `values` (multi_value),
    `hops` (variable_tracking); a task reads only its own."""

    distractors: int = 3
    values: int = 3
    hops: int = 4


class Task:
    """One retrieval task: its name, whether a conversation's turn can ask it (`in_ramp`: one question about
    one fact, at one depth), and `plant`: the plan of one document. `depths` is one depth (where the asked
    fact goes), or every depth for a task that asks one question a depth; the other facts (distractors,
    further values, later hops) go at depths drawn from `rng`."""

    name: TaskName
    in_ramp: bool = False

    def plant(self, rng: random.Random, depths: Sequence[float], knobs: Knobs) -> Planted:
        raise NotImplementedError


class Single(Task):
    name, in_ramp = "single", True

    def plant(self, rng: random.Random, depths: Sequence[float], knobs: Knobs) -> Planted:
        # the seed's needle, drawn as it always was: a seed gives the prompt it gave before
        key, value = (rng.choice(PLACES), rng.choice(SUBJECTS)), f"{rng.randint(1000, 9999)}"
        question = Question(_ask_code(key), (value,))
        return Planted(self.name, (Fact(_code(key, value), depths[0]),), (question,), (value,))


class MultiDepth(Task):
    name = "multi_depth"

    def plant(self, rng: random.Random, depths: Sequence[float], knobs: Knobs) -> Planted:
        keys, found = _keys(rng, len(depths)), _values(rng, len(depths))
        facts = tuple(Fact(_code(k, v), d) for k, v, d in zip(keys, found, depths, strict=True))
        questions = tuple(
            Question(_ask_code(k), (v,), tuple(x for x in found if x != v))
            for k, v in zip(keys, found, strict=True)
        )
        return Planted(self.name, facts, questions, tuple(found))


class MultiKey(Task):
    name, in_ramp = "multi_key", True

    def plant(self, rng: random.Random, depths: Sequence[float], knobs: Knobs) -> Planted:
        keys, found = _keys(rng, 1 + knobs.distractors), _values(rng, 1 + knobs.distractors)
        asked = [Fact(_code(keys[0], found[0]), depths[0])]
        asked += [Fact(_code(k, v), rng.random()) for k, v in zip(keys[1:], found[1:], strict=True)]
        question = Question(_ask_code(keys[0]), (found[0],), tuple(found[1:]))
        return Planted(self.name, tuple(asked), (question,), tuple(found))


class MultiValue(Task):
    name = "multi_value"

    def plant(self, rng: random.Random, depths: Sequence[float], knobs: Knobs) -> Planted:
        (key,), found = _keys(rng, 1), _values(rng, knobs.values)
        where = [depths[0], *(rng.random() for _ in found[1:])]
        facts = tuple(
            Fact(f"One of the access codes for the {key[0]} {key[1]} is {v}.", d)
            for v, d in zip(found, where, strict=True)
        )
        text = (
            f"What are all the access codes for the {key[0]} {key[1]}? Answer with the codes only, separated "
            "by commas."
        )
        return Planted(self.name, facts, (Question(text, tuple(found)),), tuple(found))


class VariableTracking(Task):
    name = "variable_tracking"

    def plant(self, rng: random.Random, depths: Sequence[float], knobs: Knobs) -> Planted:
        depth = depths[0]
        value, other = _values(rng, 2, digits=5)
        taken: set[str] = set()
        chain = [_name(rng, taken) for _ in range(knobs.hops)]
        decoy = [_name(rng, taken) for _ in range(knobs.hops)]
        # the asked chain in document order from `depth` on; the decoy chain anywhere, also in order
        later = sorted(depth + (1.0 - depth) * rng.random() for _ in chain[1:])
        tracked = _chain(chain, value, [depth, *later]) + _chain(
            decoy, other, sorted(rng.random() for _ in decoy)
        )
        text = (
            f"Which variables are assigned the value {value}, directly or through other variables? Answer "
            "with the variable names only, separated by commas."
        )
        question = Question(text, tuple(chain), tuple(decoy), words=True)
        return Planted(self.name, tuple(tracked), (question,), (value, other, *chain, *decoy))


class NonLiteral(Task):
    name, in_ramp = "non_literal", True

    def plant(self, rng: random.Random, depths: Sequence[float], knobs: Knobs) -> Planted:
        pair, name = rng.choice(NON_LITERAL), rng.choice(CHARACTERS)
        fact = Fact(f"Actually, {name} lives next to the {pair.landmark}.", depths[0])
        question = Question(
            f"Which character has been to {pair.city}? Answer with the name only.", (name,), words=True
        )
        return Planted(self.name, (fact,), (question,), (name, pair.city))


RETRIEVAL_TASKS: tuple[Task, ...] = (
    Single(),
    MultiDepth(),
    MultiKey(),
    MultiValue(),
    VariableTracking(),
    NonLiteral(),
)
_BY_NAME: dict[str, Task] = {task.name: task for task in RETRIEVAL_TASKS}
RAMP_TASKS: tuple[TaskName, ...] = tuple(task.name for task in RETRIEVAL_TASKS if task.in_ramp)


def task_named(name: str) -> Task:
    """The task of that name; an unknown one is an error that names the tasks there are."""
    if name not in _BY_NAME:
        raise ValueError(f"unknown retrieval task {name!r}; the tasks are {', '.join(TASKS)}")
    return _BY_NAME[name]


def _chain(names: Sequence[str], value: str, depths: Sequence[float]) -> list[Fact]:
    sentences = [f"VAR {names[0]} = {value}."]
    sentences += [f"VAR {name} = {before}." for before, name in zip(names, names[1:], strict=False)]
    return [Fact(s, d) for s, d in zip(sentences, depths, strict=True)]


def expected_text(question: Question) -> str:
    """What must come back, as the trial records it ("4821", or "KQZTA, BLOPR, ...")."""
    return ", ".join(question.expected)


class AnswerLabels(Labels):
    """The labels that score a record's answer again from the record alone (the needle's and the ramp's
    requests): the single fact's `needle_value` as always, else the expected and forbidden items (each a JSON
    list, so an item may hold any character; records written before lists: comma-separated) and how they
    match."""

    needle_value: str | None = None
    expected: str | None = None
    forbidden: str | None = None
    match: Literal["numbers", "words"] | None = None

    @staticmethod
    def answer(question: Question) -> dict[str, Any]:
        """The fields that carry `question`'s scoring, to build a check's labels with."""
        if len(question.expected) == 1 and not question.forbidden and not question.words:
            return {"needle_value": question.expected[0]}
        return {
            "expected": json.dumps(list(question.expected)),
            "forbidden": json.dumps(list(question.forbidden)),
            "match": "words" if question.words else "numbers",
        }

    def question(self) -> Question | None:
        """The scoring the labels carry, or None where they carry none."""
        if self.needle_value:
            return Question("", (self.needle_value,))
        if self.expected:
            expected, forbidden = _items(self.expected), _items(self.forbidden or "")
            return Question("", expected, forbidden, self.match == "words")
        return None


def _items(text: str) -> tuple[str, ...]:
    """A label's items: a JSON list, or (records written before lists) comma-separated."""
    if text.startswith("["):
        return tuple(str(item) for item in json.loads(text))
    return tuple(x for x in text.split(",") if x)


CURVE_DEPTHS = 11  # `depths = "curve"`: 0, 0.1, ..., 1


def listed_tasks(value: Any) -> Any:
    """`task = "multi_key"` is `task = ["multi_key"]`; a comma-separated flag's one item too."""
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return value


def curve_count(depths: Any) -> int | None:
    """How many depths `depths = "curve"` (11), `"curve:N"` or a count N asks for; None for a list of depths.
    Raises ValueError naming what is accepted."""
    if isinstance(depths, list) and len(depths) == 1 and isinstance(depths[0], str):
        if not depths[0].strip().startswith("curve"):
            return None  # a flag's one depth
        depths = depths[0]  # a flag's one item
    count: Any = depths
    if isinstance(depths, str):
        text = depths.strip()
        rest = text.removeprefix("curve").removeprefix(":").strip()
        count = None if not text.startswith("curve") else CURVE_DEPTHS if not rest else rest
        count = int(count) if isinstance(count, str) and count.isdigit() else count
    elif not isinstance(depths, int) or isinstance(depths, bool):
        return None
    if not isinstance(count, int) or not 1 <= count <= 64:
        raise ValueError(f"depths {depths!r}: give a list of depths, 'curve', 'curve:N' or a count 1..64")
    return count


def curve_depths(count: int) -> list[float]:
    """`count` depths evenly from 0 to 1 (one: the middle)."""
    if count == 1:
        return [0.5]
    return [round(i / (count - 1), 4) for i in range(count)]
