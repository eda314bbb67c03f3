"""Recall under load (`[checks.throughput] ask`): does a deployment that finds a planted fact with nothing
else running still find it at the load its users can be given?

After the many-users levels and the SLO search, at the level the search found within the SLO (else the
highest of `levels`): `questions` fresh documents of `length` tokens, each with a fact planted at an evenly
spread depth, are asked one at a time alone; then as many other fresh documents are asked one at a time
while that many users keep sending the check's own prompts back to back (each user starts its next request
as the last ends, and stops once the last question is answered). Each answer is scored as the needle check
scores it; each count has a Wilson 95% interval (docs/metrics.md, "Recall under load"). Every prompt is
fresh: the questions' documents and the load's prompts are drawn from seeds no other request uses.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from ...client.chat import ChatClient
from ...config.load_params import AskParams, ThroughputParams
from ...measure.stats import wilson
from ...records import CacheIntent, RequestRecord
from ...store.check_files import _Open
from ...store.run_dir import RunDir
from ...text.haystack import Needle, UnitPool, build_haystack, lead_tokens, request_seed
from ..prompts import PromptMaker
from .closed_loop import extra_body
from .file import ThroughputFile
from .labels import ThroughputLabels

UNIT = "throughput-ask"


def ask_level(params: ThroughputParams, summary: dict[str, Any]) -> int | None:
    """The users the questions are asked under: the search's level found within the SLO, else the highest
    closed-loop level; None where neither ran."""
    found = summary.get("search") or {}
    if params.search == "users" and isinstance(found.get("met"), int | float) and found["met"]:
        return int(found["met"])
    return max(params.levels, default=None)


def depths(questions: int) -> list[float]:
    """`questions` depths spread evenly, ends excluded: 1 -> [0.5], 3 -> [0.25, 0.5, 0.75]."""
    return [(i + 1) / (questions + 1) for i in range(questions)]


async def run_recall_under_load(
    client: ChatClient,
    prompts: PromptMaker,
    pool: UnitPool,
    params: ThroughputParams,
    ask: AskParams,
    run: RunDir,
    scope: tuple[str, ...],
    users: int,
    on_request: Callable[[RequestRecord], None] | None = None,
) -> dict[str, Any]:
    """Ask alone, then under `users` users' load; returns the summary `throughput.json` keeps under `ask`."""
    lead = lead_tokens(pool.counter)

    async def question(phase: str, number: int, depth: float) -> tuple[RequestRecord, bool]:
        seed = request_seed(*scope, "ask", phase, users, number)
        needle = Needle.random(random.Random(seed))
        haystack = await asyncio.to_thread(build_haystack, pool, ask.length, seed, depth=depth, needle=needle)
        record = await client.chat(
            haystack.messages,
            max_tokens=ask.max_tokens,
            request_id=run.request_id(f"tput-ask-{phase}-u{users}-q{number}"),
            labels=ThroughputLabels(
                ask=phase,
                users=users,
                question=number,
                depth=depth,
                expected=needle.value,
                planned_tokens=haystack.planned_tokens,
            ).written(),
            extra_body={"temperature": 0.0},
            cache=CacheIntent.fresh(lead, "a fresh document with a planted fact"),
        )
        run.append(record)
        if on_request is not None:
            on_request(record)
        return record, record.ok and needle.found_in(record.text)

    alone = [await question("alone", n, d) for n, d in enumerate(depths(ask.questions))]
    answered = asyncio.Event()
    load: list[RequestRecord] = []

    async def user(number: int) -> None:  # back to back until the last question is answered
        extra = extra_body(params)
        index = 0
        while not answered.is_set():
            seed = request_seed(*scope, "ask-load", users, number, index)
            messages, planned = await asyncio.to_thread(prompts, seed, number * 100_000 + index)
            record = await client.chat(
                messages,
                max_tokens=params.output_tokens,
                request_id=run.request_id(f"tput-ask-load-u{users}-user{number}-{index}"),
                labels=ThroughputLabels(
                    ask="load", users=users, user=number, index=index, planned_tokens=planned
                ).written(),
                extra_body=extra,
                cache=prompts.intent,
            )
            run.append(record)
            load.append(record)
            if on_request is not None:
                on_request(record)
            index += 1

    async def questions() -> list[tuple[RequestRecord, bool]]:
        await asyncio.sleep(0.05)  # the users' first requests are in flight before the first question
        try:
            return [await question("loaded", n, d) for n, d in enumerate(depths(ask.questions))]
        finally:
            answered.set()

    loaded, *_ = await asyncio.gather(questions(), *(user(u) for u in range(users)))
    assert loaded is not None
    return RecallUnderLoad(
        users=users,
        length=ask.length,
        alone=_score(alone),
        loaded=_score(loaded),
        load_requests=len(load),
        load_failed=sum(not r.ok for r in load),
        attempt=run.attempt,
    ).model_dump(mode="json")


class AskScore(_Open):
    found: int
    asked: int
    failed: int
    interval: tuple[float, float]  # Wilson 95%
    request_ids: list[str]

    def text(self) -> str:
        return f"{self.found}/{self.asked} [{self.interval[0]:.2f}, {self.interval[1]:.2f}]"


class RecallUnderLoad(_Open):
    """`throughput.json`'s `ask`: the questions alone and under the load of `users`, scored."""

    users: int
    length: int
    alone: AskScore
    loaded: AskScore
    load_requests: int
    load_failed: int
    attempt: int = 1

    @classmethod
    def of(cls, data: ThroughputFile | None) -> RecallUnderLoad | None:
        """The run's recall under load, where its throughput check asked it."""
        asked = (data.model_extra or {}).get("ask") if data is not None else None
        return cls.model_validate(asked) if asked else None

    def text(self) -> str:
        """'recall 3/4 [0.30, 0.95] under 2 users' load, 4/4 [0.51, 1.00] alone (1024-token documents)'."""
        return (
            f"recall {self.loaded.text()} under {self.users} users' load, {self.alone.text()} alone "
            f"({self.length}-token documents)"
        )


def _score(answers: list[tuple[RequestRecord, bool]]) -> AskScore:
    found = sum(ok for _, ok in answers)
    interval = wilson(found, len(answers))
    assert interval is not None  # at least one question: `AskParams.questions` >= 1
    return AskScore(
        found=found,
        asked=len(answers),
        failed=sum(not r.ok for r, _ in answers),
        interval=(interval.low, interval.high),
        request_ids=[r.request_id for r, _ in answers],
    )
