"""A seeded generator of small Python functions and classes, for coding prompts.

Content matters for speculative decoding: code repeats its own identifiers and shapes, which is what
n-gram drafting feeds on, while prose does not. Each snippet is valid Python built from a few templates
filled with seeded names, so prompts are fresh but realistic.
"""

from __future__ import annotations

import random

NOUNS = (
    "order invoice sensor reading packet record user session ticket shipment sample batch "
    "account message token route frame"
).split()
VERBS = "load parse filter merge score validate collect normalise group rank encode flush".split()
ATTRS = "size weight count price total latency priority age length depth".split()

TEMPLATES = (
    '''def {verb}_{noun}s({noun}s, threshold={n}):
    """{Verb} the {noun}s whose {attr} is above the threshold."""
    result = []
    for {noun} in {noun}s:
        if {noun}.{attr} > threshold:
            result.append({noun}.{attr2} * {m})
    return result
''',
    """class {Noun}{Suffix}:
    def __init__(self, {attr}, {attr2}={n}):
        self.{attr} = {attr}
        self.{attr2} = {attr2}

    def {verb}(self, other):
        return {Noun}{Suffix}(self.{attr} + other.{attr}, max(self.{attr2}, other.{attr2}))

    def __repr__(self):
        return f"{Noun}{Suffix}({attr}={{self.{attr}}}, {attr2}={{self.{attr2}}})"
""",
    """def {verb}_by_{attr}({noun}s):
    groups = {{}}
    for {noun} in {noun}s:
        key = {noun}.{attr} // {m}
        groups.setdefault(key, []).append({noun})
    return {{key: sum(x.{attr2} for x in items) for key, items in groups.items()}}
""",
    """async def {verb}_{noun}_stream(source, limit={n}):
    seen = 0
    async for {noun} in source:
        if seen >= limit:
            break
        if not {noun}.{attr}:
            continue
        seen += 1
        yield {noun}.{attr2}
""",
)


class CodeGenerator:
    """Python snippets from a seed: `CodeGenerator("s").snippet()`."""

    def __init__(self, seed: int | str) -> None:
        self._rng = random.Random(seed)

    def snippet(self) -> str:
        rng = self._rng
        attr, attr2 = rng.sample(ATTRS, 2)
        noun, verb = rng.choice(NOUNS), rng.choice(VERBS)
        return rng.choice(TEMPLATES).format(
            noun=noun,
            Noun=noun.capitalize(),
            verb=verb,
            Verb=verb.capitalize(),
            attr=attr,
            attr2=attr2,
            n=rng.randint(2, 500),
            m=rng.randint(2, 9),
            Suffix=rng.choice(("Stats", "Window", "Bucket", "View")),
        )
