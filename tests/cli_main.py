"""Commands run in-process through `ctxbench.cli.main`, the one error boundary, as the console script runs
them: the exit code main returns and everything printed (stdout and stderr, interleaved)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from click.testing import CliRunner

from ctxbench.cli import main


@dataclass(frozen=True)
class Ran:
    exit_code: int
    output: str


def run_main(args: list[str]) -> Ran:
    with CliRunner().isolation() as (_, _, output):
        try:
            code = main(list(args))
        finally:  # the streams are text wrappers over the bytes read below: what they buffer, out now
            sys.stdout.flush()
            sys.stderr.flush()
    return Ran(code, output.getvalue().decode())
