"""The `ctxbench` command: thin typer commands that build objects and call the library, one module per
command group; `main` (common.py) is the one error boundary every command's failure passes through."""

from __future__ import annotations

from . import campaigns, engines, measure, planning  # noqa: F401 - importing a group registers its commands
from .common import app, entry, main, parse_token_count
from .planning import parse_bytes

__all__ = ["app", "entry", "main", "parse_bytes", "parse_token_count"]
