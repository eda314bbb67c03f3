"""Arithmetic word problems with known answers, in GSM8K's format, for testing the quality check's plumbing
and scoring without the real data set (which ctxbench never downloads)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from .corpus import FIRST_NAMES, OBJECTS


def arithmetic_problems(n: int, seed: str = "ctxbench-arithmetic") -> list[dict[str, str]]:
    """`n` problems as GSM8K lines: `question`, and `answer` with the working and `#### <number>`."""
    rng = random.Random(seed)
    problems = []
    for index in range(n):
        name, friend = rng.sample(FIRST_NAMES, 2)
        thing = rng.choice(OBJECTS)
        start, bought, given = rng.randint(5, 60), rng.randint(2, 40), rng.randint(1, 20)
        price = rng.randint(2, 9)
        total = start + bought - given
        question = (
            f"{name} has {start} {thing}s. {name} buys {bought} more at ${price} each and gives {given} to "
            f"{friend}. How many {thing}s does {name} have now?"
        )
        answer = (
            f"{name} starts with {start} {thing}s and buys {bought}: {start} + {bought} = {start + bought}. "
            f"After giving {given} away: {start + bought} - {given} = {total}.\n#### {total}"
        )
        problems.append({"id": f"arith-{index}", "question": question, "answer": answer})
    return problems


def write_problems(path: Path, n: int, seed: str = "ctxbench-arithmetic") -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in arithmetic_problems(n, seed)))
    return path
