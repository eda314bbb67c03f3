"""mypy runs in `make test` with `warn_unused_ignores`; what it cannot check is said where it is waived: every
`# type: ignore[code]` in src/ names its code and is justified by a comment on its line or the line above."""

from __future__ import annotations

import re
from pathlib import Path

import ctxbench

ROOT = Path(ctxbench.__file__).parent
IGNORE = re.compile(r"#\s*type:\s*ignore(\[[a-z-, ]+\])?")


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    unjustified = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            found = IGNORE.search(line)
            if found is None:
                continue
            after = line[found.end() :].strip()
            above = lines[number - 1].strip() if number else ""
            if found.group(1) is None or not (after.startswith("#") or above.startswith("#")):
                unjustified.append(f"{path.relative_to(ROOT)}:{number + 1}: {line.strip()}")
    assert unjustified == [], unjustified
