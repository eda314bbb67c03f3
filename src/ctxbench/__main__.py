"""`python -m ctxbench` is the `ctxbench` command."""

from .cli import app

app(prog_name="ctxbench")
