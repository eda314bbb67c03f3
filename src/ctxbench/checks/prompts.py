"""The many-users check's prompts: fresh prose or code per request from ctxbench's generators (token-exact),
or the lines of the user's JSONL file, with an optional shared prefix every request carries."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from ..errors import PromptSourceError
from ..load_params import ThroughputParams
from ..text.code import CodeGenerator
from ..text.haystack import SEPARATOR, UnitPool, build_haystack, request_seed
from ..text.tokens import TokenCounter

QUESTIONS = {
    "prose": "Summarise the passage above in three sentences.",
    "code": "Explain what the code above does, function by function, then suggest one improvement.",
}


def read_prompts(path: Path) -> list[list[dict[str, str]]]:
    """A JSONL file of `{"prompt": "..."}` or `{"messages": [...]}` lines -> chat messages per line."""
    prompts = []
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise PromptSourceError(f"{path}: cannot read the prompts file ({exc.strerror}).") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise PromptSourceError(
                f"{path}:{number}: not JSON; write one object a line, "
                '{"prompt": "..."} or {"messages": [...]}.'
            ) from None
        if isinstance(entry, dict) and isinstance(entry.get("prompt"), str):
            prompts.append([{"role": "user", "content": entry["prompt"]}])
        elif isinstance(entry, dict) and isinstance(entry.get("messages"), list):
            prompts.append([dict(m) for m in entry["messages"]])
        else:
            raise PromptSourceError(f'{path}:{number}: needs a "prompt" string or a "messages" list.')
    if not prompts:
        raise PromptSourceError(f"{path}: no prompts in the file.")
    return prompts


class PromptMaker:
    """Fresh prompts of the spec's source, one per seed; built in a worker thread by the check."""

    def __init__(
        self, params: ThroughputParams, prose: UnitPool, counter: TokenCounter, scope: tuple[str, ...]
    ) -> None:
        self.params = params
        self.file_prompts = None if params.source in QUESTIONS else read_prompts(Path(params.source))
        self.pool = prose
        if params.source == "code":
            snippets = [CodeGenerator(request_seed(*scope, "code", i)).snippet() for i in range(512)]
            counts = counter.count_many([SEPARATOR + s for s in snippets])  # joined as paragraphs are
            self.pool = UnitPool(snippets, counts, counter, "ctxbench code generator")
        self.prefix: list[dict[str, str]] = []
        if params.shared_prefix_tokens:
            # Whole prose units up to the size: the same system prompt on every request of the campaign.
            rng = random.Random(request_seed(*scope, "shared-prefix"))
            order = rng.sample(range(len(prose.texts)), len(prose.texts))
            chosen = list(
                itertools.takewhile(
                    lambda total: total <= params.shared_prefix_tokens,
                    itertools.accumulate(prose.counts[i] for i in order),
                )
            )
            text = "\n\n".join(prose.texts[i] for i in order[: max(1, len(chosen))])
            self.prefix = [{"role": "system", "content": text}]

    def __call__(self, seed: int, index: int) -> tuple[list[dict[str, str]], int | None]:
        """(messages, planned prompt tokens or None when unknown)."""
        if self.file_prompts is not None:
            return [*self.prefix, *self.file_prompts[index % len(self.file_prompts)]], None
        haystack = build_haystack(
            self.pool,
            self.params.prompt_tokens,
            seed,
            history=self.prefix,
            question=QUESTIONS[self.params.source],
        )
        return list(haystack.messages), haystack.planned_tokens
