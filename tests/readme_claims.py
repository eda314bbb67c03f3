"""The README's capability table: each row whose status says it works, and the test files it names as showing
it (tests/unit/test_readme_claims.py checks the names; tests/conftest.py checks, after the whole suite, that
each named file had a test pass)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
TEST_FILE = re.compile(r"(?:tests/(?:unit|cli|integration)/)?(test_\w+\.py)")


def works_rows() -> list[tuple[str, str]]:
    """(capability, status) of every table row whose status begins with "works"."""
    rows = []
    for line in README.read_text().splitlines():
        if not line.startswith("| "):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.match(r"\**works", cells[-1]):
            rows.append((cells[0], cells[-1]))
    return rows


def named_files(status: str) -> list[Path]:
    """The test files a status names, each found under tests/unit, tests/cli or tests/integration (a bare
    name is looked up in each)."""
    out = []
    for name in TEST_FILE.findall(status):
        found = [ROOT / "tests" / tier / name for tier in ("integration", "unit", "cli")]
        out.append(next((path for path in found if path.exists()), found[0]))
    return out
