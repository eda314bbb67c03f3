"""`make test` fails when a category it promises is skipped (tests/conftest.py): a browser or network
namespace test that skips fails the run, unless the user names its category in CTXBENCH_ALLOW_SKIP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).parents[1] / "conftest.py"
TESTS = """
import pytest

def test_runs() -> None:
    pass

@pytest.mark.browser
def test_in_a_browser() -> None:
    pytest.skip("no chromium here")

@pytest.mark.netns
@pytest.mark.skipif(True, reason="no namespaces here")
def test_across_namespaces() -> None:
    pass
"""


def pytest_in(folder: Path, allow: str | None) -> subprocess.CompletedProcess[str]:
    (folder / "conftest.py").write_text(CONFTEST.read_text())
    (folder / "test_promised.py").write_text(TESTS)
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    browser: b\n    netns: n\n")
    env = {k: v for k, v in os.environ.items() if k != "CTXBENCH_ALLOW_SKIP"}
    if allow is not None:
        env["CTXBENCH_ALLOW_SKIP"] = allow
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_skipped_promised_category_fails_the_run_and_says_how_to_accept_it(tmp_path: Path) -> None:
    done = pytest_in(tmp_path, None)
    assert done.returncode == 1, done.stdout
    assert "error: 1 browser test(s) skipped" in done.stdout and "CTXBENCH_ALLOW_SKIP=browser" in done.stdout
    assert "error: 1 netns test(s) skipped" in done.stdout
    partly = pytest_in(tmp_path, "browser")
    assert partly.returncode == 1 and "browser test(s)" not in partly.stdout, partly.stdout
    accepted = pytest_in(tmp_path, "browser, netns")
    assert accepted.returncode == 0 and "error:" not in accepted.stdout, accepted.stdout
