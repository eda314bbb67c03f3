"""The many-users check's prompts: fresh prose or code per request from ctxbench's generators (token-exact),
or the lines of the user's JSONL file, with an optional shared prefix every request carries."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from ..config.jsonl import json_values
from ..config.load_params import ThroughputParams
from ..errors import PromptSourceError
from ..records import CacheIntent
from ..text.code import CodeGenerator
from ..text.haystack import SEPARATOR, UnitPool, build_haystack, lead_tokens, request_seed
from ..text.tokens import TokenCounter

QUESTIONS = {
    "prose": "Summarise the passage above in three sentences.",
    "code": "Explain what the code above does, function by function, then suggest one improvement.",
}


SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"} | {
    "system": "system"
}


def read_prompts(path: Path) -> list[list[dict[str, str]]]:
    """The user's prompts -> chat messages per prompt. JSONL of `{"prompt": "..."}`, `{"messages": [...]}`
    (OpenAI's) or `{"conversations": [{"from": ..., "value": ...}]}` (ShareGPT's) lines, or a JSON array of
    such objects (the ShareGPT file `vllm bench serve` and SGLang read). A ShareGPT conversation is sent up
    to its first human turn, as those tools send it. Every entry is checked here, each error naming its
    file and line (or index in an array)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise PromptSourceError(f"{path}: cannot read the prompts file ({exc.strerror}).") from None
    if text.lstrip().startswith("["):
        try:
            entries = json.loads(text)
        except ValueError as exc:
            raise PromptSourceError(f"{path}: not a JSON array ({exc}).") from None
        places = [f"{path}[{index}]" for index in range(len(entries))]
    else:
        each = 'write one object a line, {"prompt": "..."}, {"messages": [...]} or {"conversations": [...]}.'
        lines = list(json_values(path, text.splitlines(), PromptSourceError, each))
        entries, places = [entry for _, _, entry in lines], [where for _, where, _ in lines]
    prompts = [_messages(entry, where) for entry, where in zip(entries, places, strict=True)]
    if not prompts:
        raise PromptSourceError(f"{path}: no prompts in the file.")
    return prompts


def _messages(entry: object, where: str) -> list[dict[str, str]]:
    if isinstance(entry, dict) and isinstance(entry.get("prompt"), str):
        return [{"role": "user", "content": entry["prompt"]}]
    if isinstance(entry, dict) and isinstance(entry.get("messages"), list):
        messages = entry["messages"]
        for index, message in enumerate(messages):
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                raise PromptSourceError(
                    f'{where}: messages[{index}] needs a "role" and a "content" string (a server refuses it).'
                )
        if not messages:
            raise PromptSourceError(f"{where}: messages is empty.")
        return [{"role": m["role"], "content": m["content"]} for m in messages]
    if isinstance(entry, dict) and isinstance(entry.get("conversations"), list):
        turns = []
        for index, turn in enumerate(entry["conversations"]):
            said = turn.get("from") if isinstance(turn, dict) else None
            role = SHAREGPT_ROLES.get(said) if isinstance(said, str) else None
            if role is None or not isinstance(turn.get("value"), str):
                raise PromptSourceError(
                    f'{where}: conversations[{index}] needs "from" (human, gpt or system) and a "value" text.'
                )
            turns.append({"role": role, "content": turn["value"]})
            if role == "user":
                return turns
        raise PromptSourceError(f"{where}: the conversation has no human turn to send.")
    raise PromptSourceError(f'{where}: needs a "prompt" string, a "messages" list or a "conversations" list.')


class PromptMaker:
    """Fresh prompts of the spec's source, one per seed; built in a worker thread by the check."""

    def __init__(
        self, params: ThroughputParams, prose: UnitPool, counter: TokenCounter, scope: tuple[str, ...]
    ) -> None:
        self.params = params
        self.file_prompts = None if params.source in QUESTIONS else read_prompts(Path(params.source))
        self.pool = prose
        self.prose = prose  # fresh prose whatever the source: recall under load's documents
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
        self.intent = self._intent(counter)

    def _intent(self, counter: TokenCounter) -> CacheIntent:
        """What every prompt of this maker may find in a prefix cache (the same for all of them)."""
        lead = lead_tokens(counter)
        if self.file_prompts is not None:
            return CacheIntent.reusing(
                "unbounded", lead, None, f"a prompt of {self.params.source} (what they share is unknown)"
            )
        if self.prefix:
            shared = lead_tokens(counter, self.prefix)
            return CacheIntent.reusing(
                "shared_prefix", lead, shared, f"the {self.params.shared_prefix_tokens}-token shared prefix"
            )
        return CacheIntent.fresh(lead, f"a fresh {self.params.source} prompt")

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
