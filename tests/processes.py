"""Process helpers the tests share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def ctxbench(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m ctxbench ARGS` in `cwd`, as a user runs it: its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "ctxbench", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())
