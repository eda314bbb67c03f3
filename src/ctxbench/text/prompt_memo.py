"""Counting a conversation's next prompt from where it leaves the last one.

A ramp turn's prompt is the previous prompt, the reply, and new text. Counting the whole rendered prompt again
cost 2.7 s at 1M tokens on an H200 host, every turn, while the GPU waited. A counter remembers the prompts it
planned (their rendered text and exact count) and counts a new prompt as

    count(new) = count(remembered) - count(remembered[b:]) + count(new[b:])

where `b` is the end of a special token (a chat template's `<|im_start|>`, `<|im_end|>`...) up to which both
texts agree: a tokenizer starts afresh after a special token, so what lies before `b` counts the same in
both. Only the text after `b` is tokenized: the tail of the remembered prompt and the new reply and text.
Which special tokens qualify is checked on the template at start (`split_markers`): counting a rendered
conversation whole and in two parts at the token must agree, or the token is not used, and without any
such token nothing is remembered and every prompt is counted whole, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

# Prompts remembered per counter: the latest of each conversation (several users' ramps run at once).
REMEMBERED = 8
# Candidate split points tried per remembered prompt, from its end backwards.
TRIES = 8
# A remembered prompt and a new one that differ in their first characters are not the same conversation:
# compared first, so a stranger's prompt costs no full comparison.
OPENING = 4096

PROBE = (
    {"role": "user", "content": "Where is the archive? It is in Lisbon."},
    {"role": "assistant", "content": "In Lisbon."},
    {"role": "user", "content": "And the harbour office?"},
)


def split_markers(
    rendered: str, specials: Sequence[str], count_text: Callable[[str], int]
) -> tuple[str, ...]:
    """The special tokens of `specials` that occur in `rendered` (a probe conversation as the template
    renders it) and after which counting in two parts gives the whole count, at every occurrence."""
    whole = count_text(rendered)
    markers = []
    for special in specials:
        ends = _ends(rendered, special)
        if ends and all(count_text(rendered[:b]) + count_text(rendered[b:]) == whole for b in ends):
            markers.append(special)
    return tuple(markers)


def _ends(text: str, special: str) -> list[int]:
    ends, start = [], text.find(special)
    while start >= 0:
        ends.append(start + len(special))
        start = text.find(special, start + 1)
    return ends


class PromptMemo:
    """The last prompts a counter planned; thread-safe (several users' turns are built in worker threads)."""

    def __init__(self, markers: Sequence[str]) -> None:
        self.markers = tuple(markers)
        self._entries: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, tuple[str, ...]]:
        """Pickled (a counter sent to a client process): its markers, no prompts and no lock."""
        return {"markers": self.markers}

    def __setstate__(self, state: dict[str, tuple[str, ...]]) -> None:
        # unpickling makes the object without __init__; running it again rebuilds what pickling left out
        self.__init__(state["markers"])  # type: ignore[misc]  # mypy refuses calling __init__ on an instance

    def count(self, prompt: str, count_text: Callable[[str], int]) -> int:
        """`prompt`'s count, from the remembered prompt it shares the longest split prefix with, if any."""
        with self._lock:
            entries = list(self._entries)
        best: tuple[int, str, int] | None = None
        for text, total in entries:
            split = self._split(text, prompt)
            if split and (best is None or split > best[0]):
                best = (split, text, total)
        if best is None:
            return count_text(prompt)
        split, text, total = best
        return total - count_text(text[split:]) + count_text(prompt[split:])

    def remember(self, prompt: str, tokens: int) -> None:
        """`prompt` (rendered) counts `tokens`: kept (replacing the same prompt remembered before), the oldest
        dropped beyond `REMEMBERED`."""
        if not self.markers:
            return
        with self._lock:
            kept = [(text, n) for text, n in self._entries if len(text) != len(prompt) or text != prompt]
            self._entries = [*kept[-(REMEMBERED - 1) :], (prompt, tokens)]

    def _split(self, text: str, prompt: str) -> int:
        """The last end of a marker in `text` up to which `prompt` is the same text; 0 if none."""
        if not self.markers or text[:OPENING] != prompt[:OPENING]:
            return 0
        candidates = sorted({b for m in self.markers for b in _last_ends(text, m, TRIES)}, reverse=True)
        for split in candidates[:TRIES]:
            if split <= len(prompt) and prompt.startswith(text[:split]):
                return split
        return 0


def _last_ends(text: str, special: str, count: int) -> list[int]:
    """The ends of the last `count` occurrences of `special` in `text`."""
    ends: list[int] = []
    start = len(text)
    while len(ends) < count:
        start = text.rfind(special, 0, start)
        if start < 0:
            break
        ends.append(start + len(special))
    return ends
