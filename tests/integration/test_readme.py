"""The README's Python examples run as written (server, model and campaign file swapped for the tests')."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxbench.engines.llamacpp import LlamaServer

README = Path(__file__).parents[2] / "README.md"
pytestmark = pytest.mark.engine


def test_readme_python_example_runs(tiny_server: LlamaServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    code = code.replace("http://127.0.0.1:8080", tiny_server.base_url).replace('"my-model"', '"tiny"')
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert "prompt_tokens=" in printed and "completion_tokens=" in printed  # random weights: length varies


CAMPAIGN = """
[campaign]
name = "readme"
results = "{results}"

[checks.probe]
document_chars = 0
max_tokens = 4
concurrency = 1

[[deployments]]
name = "tiny"
engine = "llamacpp"
model = "ctxbench:tiny"
ctx_size = 1024
random_weights = true
"""


def test_readme_campaign_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    campaign = tmp_path / "readme.toml"
    campaign.write_text(CAMPAIGN.format(results=tmp_path / "results"))
    code = code.replace('Path("examples/demo.toml")', f"Path({str(campaign)!r})")
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert "tiny done" in printed and (tmp_path / "results" / "runs").is_dir()
