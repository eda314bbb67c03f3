"""What a replayed trace's requests could find in a prefix cache, from the order they actually ran in.

A trace names each prompt's blocks (`hash_ids`); two prompts that begin with the same ids share those blocks.
Which of them a server can have cached depends on when each request ran, not on the trace's order: two
requests with the same timestamp are sent together and served in whichever order the server takes them.
From the records (each labelled with its whole blocks' ids, `whole_ids`, and the lead every prompt shares,
`lead_tokens`), per request:

- **implied**: what an unbounded prefix cache would serve: the lead, once any earlier request has ended, and
  the leading whole blocks it shares with the requests that *succeeded and ended before it was sent*. A
  predecessor the server refused was never cached. This is the expectation the summary reports.
- **bound**: the most any cache could serve: the lead, the leading whole blocks it shares with any request
  that reached the server while it was in flight or before (sent before it ended, in either order), and the
  start of the next block (a cut block begins like the whole one of the same id). A hit beyond this is reuse
  the trace does not explain: the audit's finding.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence

from ...records import RequestRecord
from .labels import TraceLabels


class _Prefixes:
    """Each distinct leading run of block ids as one number (a trie's node): a request's k prefixes are k
    numbers, not k tuples of up to k ids (a 1M-token prompt has 2,048 blocks of 512)."""

    def __init__(self) -> None:
        self._nodes: dict[tuple[int, int], int] = {}

    def of(self, ids: Sequence[int]) -> list[int]:
        node, nodes = -1, []
        for block in ids:
            node = self._nodes.setdefault((node, block), len(self._nodes))
            nodes.append(node)
        return nodes


def _shared(prefixes: Sequence[int], held: Counter[int], own: bool = False) -> int:
    """Leading blocks whose prefix `held` holds (less one count each where the request itself was counted)."""
    shared = 0
    for prefix in prefixes:
        if held[prefix] - (1 if own else 0) <= 0:
            break
        shared += 1
    return shared


def _labelled(labels: Sequence[TraceLabels]) -> bool:
    return all(k.whole_ids is not None and k.lead_tokens is not None for k in labels)


def _int(value: int | None) -> int:
    """A label every trace record carries (the model types them optional, for records of every age)."""
    if value is None:
        raise ValueError("a trace record without its block labels: recorded by a ctxbench too old to audit")
    return value


def implied_cached(records: Sequence[RequestRecord]) -> dict[str, int]:
    """Per request id: the tokens an unbounded cache would serve it, from its predecessors that succeeded and
    ended before it was sent. Records made before the blocks were labelled keep their hash-order figure
    (`expected_cached_tokens`)."""
    tags = [TraceLabels.of(r) for r in records]
    if not _labelled(tags):
        return {r.request_id: _int(k.expected_cached_tokens) for r, k in zip(records, tags, strict=True)}
    ended: list[tuple[int, int]] = []  # (end_ns, index) of succeeded requests, a heap
    held: Counter[int] = Counter()
    trie = _Prefixes()
    prefixes = [trie.of(k.block_ids) for k in tags]
    implied: dict[str, int] = {}
    any_ended = False
    order = sorted(range(len(records)), key=lambda i: records[i].sent_ns)
    for i, record in enumerate(records):
        if record.ok:
            heapq.heappush(ended, (record.end_ns, i))
    for i in order:
        record = records[i]
        while ended and ended[0][0] <= record.sent_ns:
            _, done = heapq.heappop(ended)
            held.update(prefixes[done])
            any_ended = True
        blocks = _shared(prefixes[i], held) * _int(tags[i].block_tokens)
        implied[record.request_id] = (_int(tags[i].lead_tokens) if any_ended else 0) + blocks
    return implied


def reuse_bound(records: Sequence[RequestRecord]) -> dict[str, int]:
    """Per request id: the most tokens any prefix cache could serve it (the module's docstring). Records made
    before the blocks were labelled: their hash-order figure plus the overhead and one block, as before."""
    by_id = {r.request_id: TraceLabels.of(r) for r in records}
    if not _labelled(list(by_id.values())):
        return {
            request: _int(k.expected_cached_tokens) + _int(k.overhead_tokens) + _int(k.block_tokens)
            for request, k in by_id.items()
        }
    # a request the server began to answer, or answered: its prompt was computed, so it may be cached
    trie = _Prefixes()
    prefixes = {request: trie.of(k.block_ids) for request, k in by_id.items()}
    reached = sorted((r for r in records if r.ok or r.first_byte_ns is not None), key=lambda r: r.sent_ns)
    held: Counter[int] = Counter()
    bound: dict[str, int] = {}
    added = 0
    for record in sorted(records, key=lambda r: r.end_ns):
        while added < len(reached) and reached[added].sent_ns < record.end_ns:
            held.update(prefixes[reached[added].request_id])
            added += 1
        own = record.ok or record.first_byte_ns is not None
        blocks = _shared(prefixes[record.request_id], held, own=own)
        own_labels = by_id[record.request_id]
        bound[record.request_id] = _int(own_labels.lead_tokens) + (blocks + 1) * _int(own_labels.block_tokens)
    return bound
