"""The many-users check's prompts: fresh prose or code per request from ctxbench's generators (token-exact),
or the lines of the user's JSONL file, with an optional shared prefix every request carries."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PromptFile:
    """A prompts file as read: each prompt's messages, and the ShareGPT entries skipped as vLLM's loader skips
    them (fewer than 2 turns), with those that have no human turn to send."""

    prompts: list[list[dict[str, str]]]
    skipped: int = 0

    def text(self, path: str) -> str:
        """What the file holds, for the dry run: "12 prompts from x.json (3 conversations skipped: ...)"."""
        skipped = (
            f" ({self.skipped} ShareGPT conversation(s) skipped: fewer than 2 turns or no human turn, as "
            "vLLM's loader skips them)"
            if self.skipped
            else ""
        )
        return f"{len(self.prompts)} from {path}{skipped}"


def read_prompts(path: Path) -> list[list[dict[str, str]]]:
    """The user's prompts -> chat messages per prompt (`read_prompt_file`)."""
    return read_prompt_file(path).prompts


def read_prompt_file(path: Path) -> PromptFile:
    """The user's prompts. JSONL of `{"prompt": "..."}`, `{"messages": [...]}` (OpenAI's, each `content` a
    string or a list of text parts, joined by newlines) or `{"conversations": [{"from": ..., "value": ...}]}`
    (ShareGPT's) lines, or a JSON array of such objects (the ShareGPT `.json` that `vllm bench serve` and
    SGLang read). A ShareGPT conversation is read by vLLM's loader's rule: one of fewer than 2 turns is
    skipped, not fatal; the prompt is its first human turn (after the system turn, where one comes first);
    one with no human turn is skipped too. Every other entry is checked here, each error naming its file and
    line (or index in an array)."""
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
    read = [_messages(entry, where) for entry, where in zip(entries, places, strict=True)]
    prompts = [messages for messages in read if messages is not None]
    if not prompts:
        skipped = f" ({len(read)} ShareGPT conversation(s) skipped: fewer than 2 turns or no human turn)"
        raise PromptSourceError(f"{path}: no prompts in the file{skipped if read else ''}.")
    return PromptFile(prompts, len(read) - len(prompts))


def _content(content: object, where: str) -> str | None:
    """A message's content as the text sent: a string, or a list of text parts joined by newlines (as vLLM
    joins them for a string-format chat template); None where it is neither."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for index, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise PromptSourceError(
                f'{where}: content[{index}] is a {kind!r} part; ctxbench sends text alone: give {{"type": '
                '"text", "text": "..."}} parts or a content string.'
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _messages(entry: object, where: str) -> list[dict[str, str]] | None:
    """One entry's messages; None for a ShareGPT conversation skipped by vLLM's rule."""
    if isinstance(entry, dict) and isinstance(entry.get("prompt"), str):
        return [{"role": "user", "content": entry["prompt"]}]
    if isinstance(entry, dict) and isinstance(entry.get("messages"), list):
        messages = []
        for index, message in enumerate(entry["messages"]):
            content = (
                _content(message.get("content"), f"{where}: messages[{index}]")
                if isinstance(message, dict)
                else None
            )
            if not (
                isinstance(message, dict) and isinstance(message.get("role"), str) and content is not None
            ):
                raise PromptSourceError(
                    f'{where}: messages[{index}] needs a "role" and a "content" string or list of text parts '
                    "(a server refuses it)."
                )
            messages.append({"role": message["role"], "content": content})
        if not messages:
            raise PromptSourceError(f"{where}: messages is empty.")
        return messages
    if isinstance(entry, dict) and isinstance(entry.get("conversations"), list):
        conversation = entry["conversations"]
        if len(conversation) < 2:  # vLLM's loader keeps conversations of 2 turns or more
            return None
        turns: list[dict[str, str]] = []
        for index, turn in enumerate(conversation):
            said = turn.get("from") if isinstance(turn, dict) else None
            role = SHAREGPT_ROLES.get(said) if isinstance(said, str) else None
            if role is None or not isinstance(turn.get("value"), str):
                raise PromptSourceError(
                    f'{where}: conversations[{index}] needs "from" (human, gpt or system) and a "value" text.'
                )
            if role == "user":
                return [*turns, {"role": "user", "content": turn["value"]}]
            if role == "system" and not turns:
                turns.append({"role": "system", "content": turn["value"]})
        return None  # no human turn to send
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
