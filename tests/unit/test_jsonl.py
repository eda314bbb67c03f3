"""A user's JSONL file, read one way for the trace, the session traces and the many-users prompts: blank lines
skipped, every error at its file and line as the caller's own error class."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctxbench.checks.prompts import read_prompts
from ctxbench.checks.sessions.recorded import read_session_trace, sessions_of_mlperf_agentic
from ctxbench.checks.trace import TraceFileError, read_trace
from ctxbench.config.jsonl import json_values, read_lines
from ctxbench.errors import PromptSourceError


def test_blank_lines_are_skipped_and_each_value_keeps_its_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n  \n[2]\n')
    values = list(json_values(path, read_lines(path, TraceFileError, "x"), TraceFileError, "one a line"))
    assert values == [(1, f"{path}:1", {"a": 1}), (4, f"{path}:4", [2])]


class CharCounter:
    """A token counter the agentic reader is given (it fails before it counts anything here)."""

    def count(self, text: str) -> int:
        return len(text)


@pytest.mark.parametrize(
    ("read", "error"),
    [
        (read_trace, TraceFileError),
        (read_session_trace, TraceFileError),
        (lambda path: sessions_of_mlperf_agentic(path, CharCounter()), TraceFileError),
        (read_prompts, PromptSourceError),
    ],
)
def test_each_reader_names_the_line_that_is_not_json_and_a_file_it_cannot_read(
    tmp_path: Path, read: Callable[[Path], object], error: type[Exception]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n{not json\n")
    with pytest.raises(error, match=r"bad\.jsonl:2: not JSON \(.+\); "):
        read(path)
    with pytest.raises(error, match=r"missing\.jsonl: cannot read"):
        read(tmp_path / "missing.jsonl")
