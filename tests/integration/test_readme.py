"""The README's Python example runs as written (server address and model swapped for the test server's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxbench.engines.llamacpp import LlamaServer

README = Path(__file__).parents[2] / "README.md"
pytestmark = pytest.mark.engine


def test_readme_python_example_runs(tiny_server: LlamaServer, capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    code = code.replace("http://127.0.0.1:8080", tiny_server.base_url).replace('"my-model"', '"tiny"')
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert "prompt_tokens=" in printed and "completion_tokens=" in printed  # random weights: length varies
