"""Each retrieval task's planting and scoring (text/tasks.py): the facts sit where the plan says, in a prompt
of exactly the planned tokens; distractors are distinct; a right answer scores and a near miss does not."""

from __future__ import annotations

import random
import re

import pytest

from ctxbench.checks.needle import NeedleParams
from ctxbench.engines.models import tiny_model
from ctxbench.text.corpus import FIRST_NAMES, PLACES
from ctxbench.text.haystack import SEPARATOR, UnitPool, build_planted
from ctxbench.text.tasks import (
    CHARACTERS,
    NON_LITERAL,
    RAMP_TASKS,
    RETRIEVAL_TASKS,
    TASKS,
    AnswerLabels,
    Knobs,
    Planted,
    Question,
    task_named,
    words_in,
)
from ctxbench.text.tokens import HfTokenCounter

DEPTHS = (0.1, 0.5, 0.9)


@pytest.fixture(scope="module")
def counter() -> HfTokenCounter:
    return HfTokenCounter.from_path(tiny_model().tokenizer_dir)


@pytest.fixture(scope="module")
def pool(counter: HfTokenCounter) -> UnitPool:
    return UnitPool.generated(counter, units=1024)


def _plan(task: str, seed: int = 7) -> Planted:
    return task_named(task).plant(random.Random(seed), DEPTHS if task == "multi_depth" else (0.5,), Knobs())


@pytest.mark.parametrize("task", TASKS)
def test_every_task_is_token_exact_and_its_facts_sit_at_their_depths(
    task: str, pool: UnitPool, counter: HfTokenCounter
) -> None:
    def plan(rng: random.Random) -> Planted:
        return task_named(task).plant(rng, DEPTHS if task == "multi_depth" else (0.5,), Knobs())

    haystacks = build_planted(pool, 6000, 11, plan)
    planted = haystacks[0].planted
    assert planted is not None and len(haystacks) == len(planted.questions)
    for haystack in haystacks:
        assert counter.count_chat(haystack.messages) == haystack.planned_tokens
        assert (
            0 <= haystack.target_tokens - haystack.planned_tokens <= 12
        )  # a shorter question: a little less
    content = haystacks[0].messages[-1]["content"]
    paragraphs = content.split(SEPARATOR)
    document = paragraphs[1:-1]  # the header first, the question last
    for fact in planted.facts:
        assert content.count(fact.sentence) == 1, fact.sentence  # once, as a paragraph of its own
        where = document.index(fact.sentence) / len(document)
        assert abs(where - fact.depth) < 0.05, (task, fact.depth, where)
    # the document is the same before every question: a second question reads it from the prefix cache
    assert len({h.messages[-1]["content"].rsplit(SEPARATOR, 1)[0] for h in haystacks}) == 1


@pytest.mark.parametrize("task", TASKS)
def test_no_planted_value_is_elsewhere_in_the_document(task: str, pool: UnitPool) -> None:
    (haystack, *_) = build_planted(pool, 6000, 3, lambda rng: _plan(task, 3))
    planted = haystack.planted
    assert planted is not None and planted.avoid
    text = haystack.messages[-1]["content"]
    for sentence in (f.sentence for f in planted.facts):
        text = text.replace(sentence, "")
    question = haystack.question
    assert question is not None
    text = text.replace(question.text, "")
    for value in planted.avoid:
        assert not set(words_in(value)) & words_in(text), (task, value)


def test_multi_depth_asks_one_question_per_fact_each_scored_on_its_own() -> None:
    planted = _plan("multi_depth")
    assert [f.depth for f in planted.facts] == list(DEPTHS) and len(planted.questions) == 3
    values = [q.expected[0] for q in planted.questions]
    assert len(set(values)) == 3
    first = planted.questions[0]
    assert first.score(f"The code is {values[0]}.") and not first.score(f"It is {values[1]}.")
    assert not first.score(f"{values[0]} or {values[2]}")  # naming another depth's code too is a miss


def test_multi_key_distractors_are_distinct_and_answering_one_is_a_miss() -> None:
    planted = task_named("multi_key").plant(random.Random(1), (0.5,), Knobs(distractors=5))
    assert len(planted.facts) == 6 and planted.facts[0].depth == 0.5
    keys = [re.sub(r" is \d+\.$", "", f.sentence) for f in planted.facts]
    values = [f.sentence.rsplit(" ", 1)[1].rstrip(".") for f in planted.facts]
    assert len(set(keys)) == 6 and len(set(values)) == 6
    (question,) = planted.questions
    assert question.expected == (values[0],) and set(question.forbidden) == set(values[1:])
    assert keys[0].removeprefix("The access code for the ") in question.text
    assert question.score(f"The access code is {values[0]}.")
    assert not question.score(values[1]) and not question.score(f"{values[0]}0")


def test_multi_value_needs_every_value_back() -> None:
    planted = task_named("multi_value").plant(random.Random(2), (0.3,), Knobs(values=4))
    (question,) = planted.questions
    assert len(planted.facts) == 4 and planted.facts[0].depth == 0.3 and len(set(question.expected)) == 4
    assert question.score(", ".join(reversed(question.expected)))
    assert not question.score(", ".join(question.expected[:3]))  # one missing: a miss


def test_variable_tracking_wants_the_whole_chain_and_none_of_the_decoy() -> None:
    planted = task_named("variable_tracking").plant(random.Random(4), (0.2,), Knobs(hops=3))
    (question,) = planted.questions
    chain, decoy = question.expected, question.forbidden
    assert len(chain) == 3 and len(decoy) == 3 and not set(chain) & set(decoy)
    sentences = [f.sentence for f in planted.facts]
    value = re.search(r"value (\d+)", question.text).group(1)  # type: ignore[union-attr]
    assert f"VAR {chain[0]} = {value}." in sentences
    assert f"VAR {chain[1]} = {chain[0]}." in sentences and f"VAR {chain[2]} = {chain[1]}." in sentences
    chain_depths = [f.depth for f in planted.facts[:3]]
    assert chain_depths == sorted(chain_depths) and chain_depths[0] == 0.2  # in document order from the depth
    assert question.score(", ".join(c.lower() for c in chain))  # names in any case
    assert not question.score(", ".join(chain[:2]))
    assert not question.score(", ".join([*chain, decoy[0]]))


def test_non_literal_fact_and_question_share_no_content_word() -> None:
    stop = {
        "the",
        "to",
        "has",
        "been",
        "which",
        "with",
        "only",
        "answer",
        "name",
        "next",
        "actually",
        "lives",
    }
    for seed in range(40):
        planted = task_named("non_literal").plant(random.Random(seed), (0.5,), Knobs())
        (fact,), (question,) = planted.facts, planted.questions
        shared = (words_in(fact.sentence) & words_in(question.text)) - stop
        assert not shared, (fact.sentence, question.text)
        assert question.score(f"It was {question.expected[0]}.") and not question.score("Nobody did.")
    assert all(p.source.startswith("https://") for p in NON_LITERAL)
    assert not {p.city for p in NON_LITERAL} & set(PLACES) and not set(CHARACTERS) & set(FIRST_NAMES)


def test_a_near_miss_does_not_score() -> None:
    assert Question("", ("1234",)).score("code: 1234.")
    assert not Question("", ("1234",)).score("12345") and not Question("", ("1234",)).score("1,234")
    assert not Question("", ("Yuki",), words=True).score("Yukiko")


def _read_back(question: Question) -> Question | None:
    """The question as a record's labels carry it, written and read back as text."""
    return AnswerLabels.parse(AnswerLabels(**AnswerLabels.answer(question)).written()).question()


def test_a_records_labels_carry_its_scoring() -> None:
    single = Question("q", ("4821",))
    assert AnswerLabels(**AnswerLabels.answer(single)).written() == {"needle_value": "4821"}
    several = task_named("variable_tracking").plant(random.Random(5), (0.5,), Knobs()).questions[0]
    again = _read_back(several)
    assert again is not None and (again.expected, again.forbidden, again.words) == (
        several.expected,
        several.forbidden,
        True,
    )
    assert AnswerLabels.parse({}).question() is None
    # an item may hold a comma (a name "Smith, J."): the labels keep it whole and score it so
    comma = Question("q", ("Smith, J.", "Yuki"), ("Doe, A.",), words=True)
    back = _read_back(comma)
    assert back is not None and (back.expected, back.forbidden) == (comma.expected, comma.forbidden)
    # records written before the lists: comma-separated items still read
    older = AnswerLabels.parse({"expected": "KQZTA,BLOPR", "forbidden": "XYZAB", "match": "words"}).question()
    assert older is not None and (older.expected, older.forbidden) == (("KQZTA", "BLOPR"), ("XYZAB",))


def test_the_single_task_draws_the_seeds_needle_as_before() -> None:
    # the draws the needle always made, in this order: so a campaign's seeds give the prompts they gave
    subjects = ("archive", "harbour office", "observatory", "seed vault", "printing house", "signal station")
    for seed in range(20):
        rng = random.Random(seed)
        place, subject, value = rng.choice(PLACES), rng.choice(subjects), f"{rng.randint(1000, 9999)}"
        planted = task_named("single").plant(random.Random(seed), (0.5,), Knobs())
        assert planted.facts[0].sentence == f"The access code for the {place} {subject} is {value}."
        assert planted.questions[0].expected == (value,) and planted.avoid == (value,)


def test_tasks_and_depth_curves_in_the_campaign_schema() -> None:
    assert NeedleParams(task="multi_key").task == ["multi_key"]
    assert NeedleParams(task=["single", "non_literal"], lengths=[4096]).trial_count() == 2 * (3 + 3)
    curve = NeedleParams(depths="curve")
    assert curve.depth_curve and curve.depths == [i / 10 for i in range(11)]
    assert NeedleParams(depths=5).depths == [0.0, 0.25, 0.5, 0.75, 1.0] and NeedleParams(depths=1).depths == [
        0.5
    ]
    assert NeedleParams(depths=["curve:3"]).depths == [0.0, 0.5, 1.0]  # the --depths flag's one item
    assert not NeedleParams(depths=[0.2, 0.8]).depth_curve
    for bad, message in (
        ({"task": "needle"}, "single"),
        ({"task": ["single", "single"]}, "twice"),
        ({"depths": "curvy"}, "curve"),
        ({"depths": 0}, "count 1..64"),
    ):
        with pytest.raises(ValueError, match=message):
            NeedleParams(**bad)


def test_a_tasks_cell_says_not_scored_rather_than_0_of_0_and_names_a_missed_control() -> None:
    from ctxbench.checks.needle.file import Control
    from ctxbench.checks.needle.retrieval import TaskResult

    assert TaskResult("multi_key", 0, 0, None, alone=False).text() == "multi_key not scored"
    assert TaskResult("multi_key", 2, 3, None, alone=False).text() == "multi_key 2/3 [0.21, 0.94]"
    missed = Control(length=512, found=1, scored=3)
    assert (
        TaskResult("non_literal", 1, 3, missed, alone=False)
        .text()
        .endswith("(fails at the 512-token control)")
    )


def test_every_task_is_one_object_and_the_ramp_asks_the_ones_it_can() -> None:
    """`Task` objects: one a name, in `TaskName`'s order; the ramp's tasks are those a turn can ask (one
    question about one fact), and its parameters refuse the others by name."""
    import pytest as _pytest
    from pydantic import ValidationError

    from ctxbench.checks.ramp import RampParams

    assert tuple(task.name for task in RETRIEVAL_TASKS) == TASKS
    assert RAMP_TASKS == ("single", "multi_key", "non_literal")
    assert RampParams(task="multi_key").task == "multi_key"
    with _pytest.raises(ValidationError, match="the ramp asks one question a turn: single, multi_key"):
        RampParams(task="multi_value")
    with _pytest.raises(ValueError, match="unknown retrieval task 'haystack'; the tasks are single"):
        task_named("haystack")
