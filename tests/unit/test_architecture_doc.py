"""docs/architecture.md's module table is drawn from the code: every module of the package is named in it
(itself, or a folder holding it), and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import ctxbench

ROOT = Path(ctxbench.__file__).parent
DOC = Path(__file__).parents[2] / "docs" / "architecture.md"


def named_paths() -> set[str]:
    """The first column of every table row: `text/tasks.py`, `checks/capacity/`, `cli/`."""
    return {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", DOC.read_text(), re.MULTILINE)}


def test_every_module_is_named_in_the_architecture_table() -> None:
    named = named_paths()
    unnamed = []
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        if path.name in ("__init__.py", "__main__.py") or "vendor" in relative.parts:
            continue
        folders = {"/".join(relative.parts[:i]) + "/" for i in range(1, len(relative.parts))}
        if relative.as_posix() not in named and not folders & named:
            unnamed.append(relative.as_posix())
    assert sorted(unnamed) == [], "name each in docs/architecture.md's table, under its stage"


def test_every_path_the_table_names_exists() -> None:
    missing = sorted(name for name in named_paths() if not (ROOT / name).exists())
    assert missing == []
