"""A file a user gives one JSON value a line (a trace, a session trace, prompts), read a line at a time:
blank lines skipped, every error naming the file and the line, raised as the caller's own error class."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..errors import UsageError


def read_lines(path: Path, error: type[UsageError], what: str) -> list[str]:
    """The file's lines; an unreadable file is `error` naming it, `what` it is and the OS's reason."""
    try:
        return path.expanduser().read_text().splitlines()
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror}); give a local JSONL file") from None


def json_values(
    path: Path, lines: list[str], error: type[UsageError], each: str
) -> Iterator[tuple[int, str, object]]:
    """(line number, "file:line", value) of each non-blank line; a line that is not JSON is `error` at its
    place, saying why and what `each` line should be."""
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise error(f"{where}: not JSON ({exc}); {each}") from None
        yield number, where, value
