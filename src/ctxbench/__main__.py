"""`python -m ctxbench` is the `ctxbench` command."""

from .cli import entry

entry()
