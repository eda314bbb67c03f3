"""What every command shares: the app, the one error boundary (`main`), consoles, options, helpers."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import traceback
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import Progress
from rich.text import Text

from .. import __version__
from ..errors import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    CtxbenchError,
    ServerUnreachable,
    UsageError,
    check_url,
    validation_message,
)
from ..records import RequestRecord, requests_line
from ..render.tables import request_lines
from ..report.run_page import write_run_report
from ..report.run_report import claims_summary
from ..store.run_dir import RunDir
from .progress import PlainProgress, progress

app = typer.Typer(
    help="Does this deployment really serve long contexts? Measure it, with evidence.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts name `[ray]` and `[checks.trace]`: never read as markup
)


engine_app = typer.Typer(
    help="Build the embedded engine (llama.cpp's llama-server).", no_args_is_help=True, rich_markup_mode=None
)


model_app = typer.Typer(
    help="Prepare local models (no hub download at run time).", no_args_is_help=True, rich_markup_mode=None
)


app.add_typer(engine_app, name="engine")


app.add_typer(model_app, name="model")


console = Console(soft_wrap=True, markup=False)  # no text is read as markup; a log's lines whole


errors = Console(stderr=True, highlight=False, soft_wrap=True)


ParamsT = TypeVar("ParamsT", bound=BaseModel)


_debug = False  # --debug: a failure also prints its traceback


# click's base of usage errors (typer vendors click from 0.2x on, so it is found, not imported)
# typer's own copy of click's exception (not the `click` package's class): found by name, typed Any
_ClickException: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def results_dir_problem(value: Path) -> str | None:
    """Why ctxbench cannot keep results under `value` (a file there or above it, no permission), or None for
    an existing writable directory or one it can create."""
    existing = next((p for p in (value, *value.absolute().parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        return f"{existing} is a file, not a directory; give a results directory"
    if existing is None or not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot write under {existing or value} (permission denied); give a directory you can write"
    return None


def _results_flag(value: Path | None) -> Path | None:
    problem = None if value is None else results_dir_problem(value)
    if problem is not None:
        raise typer.BadParameter(problem)
    return value


ResultsOption = Annotated[
    Path, typer.Option("--results", help="Results directory (created if absent).", callback=_results_flag)
]


def _url_flag(value: str) -> str:
    try:
        return check_url(value, "--url")
    except UsageError as exc:
        raise typer.BadParameter(str(exc)) from None


UrlOption = Annotated[
    str, typer.Option(help="Base URL of the server, e.g. http://127.0.0.1:8000.", callback=_url_flag)
]


ModelOption = Annotated[str, typer.Option(help="Model name the server serves.")]


def _validated(model: type[ParamsT], flags: dict[str, str], **values: object) -> ParamsT:
    """`values` checked by the campaign file's own model of the check (its `params_type`): the same defaults,
    ranges and messages; an error names the flag it came from."""
    try:
        return model(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        given = f" (given {error['input']!r})" if key else ""
        message = validation_message(error["msg"])
        raise typer.BadParameter(message + given, param_hint=flags.get(key)) from None


def _default(model: type[BaseModel], key: str) -> Any:
    """A parameter's default as the campaign file's model states it: a flag's default is never a copy."""
    field = model.model_fields[key]
    # pydantic types default_factory as taking the validated data or nothing; ctxbench's take nothing
    return field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]


def _listed(text: str, flag: str) -> list[str]:
    """A comma-separated flag's items, for the check's model to check one by one."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if text.strip() and not items:
        raise typer.BadParameter(f"{text!r}: give values separated by commas", param_hint=flag)
    return items


def _report(exc: BaseException) -> None:
    _error(str(exc))
    _traceback(exc)


def main(argv: list[str] | None = None) -> int:
    """The one error boundary: every command's failure reaches the user here as `error: ...` on stderr and an
    exit code (errors.py), never as a traceback unless --debug asks for one. SIGTERM (a scheduler, `kill`,
    a container stopping) is taken as Ctrl-C: requests in flight are recorded as interrupted, engines
    stopped."""
    terminated = _sigterm_as_interrupt()
    try:
        code = app(args=argv, prog_name="ctxbench", standalone_mode=False)
    except _ClickException as exc:  # a bad flag or argument: click names it
        exc.show()
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        code = EXIT_INTERRUPTED
    except CtxbenchError as exc:
        _report(exc)
        if exc.leave_at_once:  # what was measured is on disk already; nothing of this process is left to do
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exc.exit_code)
        return exc.exit_code
    except OSError as exc:  # the machine, not ctxbench: a full disk, a path that vanished, no permission
        _error(
            f"{exc.filename or 'a file'}: {exc.strerror or exc} (a path ctxbench reads or writes: check the "
            "paths the command and its campaign file give)"
        )
        _traceback(exc)
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - the boundary: anything else is a ctxbench bug, said as one
        _error(
            f"internal error ({type(exc).__name__}: {exc}): a ctxbench bug; rerun with --debug for the "
            "traceback and report it"
        )
        _traceback(exc)
        return EXIT_INTERNAL
    finally:
        if terminated is not None:
            signal.signal(signal.SIGTERM, terminated)
    if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130) before any handler here sees it
        _error(
            "interrupted; what was measured is written and requests in flight are recorded as "
            "interrupted (rerun the same command to resume a campaign)"
        )
    return code if isinstance(code, int) else 0


def _sigterm_as_interrupt() -> Any:
    """Raise KeyboardInterrupt on SIGTERM, as on Ctrl-C; returns the handler it replaced (None: not the main
    thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, signal.default_int_handler)


def _error(message: str) -> None:
    """`error: message` on stderr; the message is shown as written, never read as markup."""
    errors.print(Text.assemble(("error:", "bold red"), " ", message))


def _traceback(exc: BaseException) -> None:
    if _debug:
        errors.print("".join(traceback.format_exception(exc)), markup=False)


def entry() -> None:
    """The `ctxbench` console script."""
    sys.exit(main())


def _progress() -> Progress | PlainProgress:
    return progress(console)


@app.callback(invoke_without_command=True)
def _main(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="On a failure, print the traceback too.")] = False,
) -> None:
    global _debug
    _debug = debug
    if version:
        console.print(f"ctxbench {__version__}")
        raise typer.Exit()


def _print_records(records: list[RequestRecord]) -> None:
    """Each request in two lines that read whole at the console's width (80 where it is no terminal); the
    run report has the full table."""
    width = max(40, console.width)
    for record in records:
        for line in request_lines(record, width):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def _finish(run: RunDir, results: Path) -> None:
    """Rebuild the run's report, print its claims and its verdict, rebuild the evidence report of `results`;
    exit 3 when no request reached the server, 1 when the verdict is FAILED or a request the check needed
    failed."""
    from ..report.campaign import write_campaign_report

    write_run_report(run)
    records = list(run.records())
    status = print_verdict(run, results)
    markdown_path, html_path = write_campaign_report(results)
    say(f"run report: {run.path / 'report.md'}\nevidence:   {markdown_path}\n            {html_path}")
    _reached(records, run)
    failed = needed_failures(records)
    if failed:
        first = failed[0].error
        _error(
            f"{len(failed)} of {len(records)} request(s) failed, first: "
            f"{first.kind if first else ''}: {first.message if first else ''} (records: {run.requests_path})"
        )
    if failed or status == "failed":
        raise typer.Exit(code=EXIT_FAILED)


def say(line: str, on: Console | None = None) -> None:
    """One line to stdout as written: no markup read in it, no highlighting. On a terminal it wraps at word
    boundaries (a word longer than the line, a path, stays whole); piped, it stays one line."""
    out = on or console
    # an indented line is a table's or a list's, laid out already
    wrap = out.is_terminal and len(line) > out.width and not line.startswith(" ")
    parts = textwrap.wrap(line, out.width, break_long_words=False, break_on_hyphens=False) if wrap else [line]
    for part in parts or [line]:
        out.print(part, markup=False, highlight=False, soft_wrap=True)


def print_verdict(run: RunDir, results: Path) -> str:
    """The run's claims, its verdict and the verdict's reasons, as the glance and the evidence table state
    them (docs/validation.md); returns the status."""
    from ..results.evidence import evidence_row

    say(f"{requests_line(list(run.records()))}")
    for line in claims_summary(run):
        say(line)
    row = evidence_row(results, run)
    say(f"verdict: {row.status.upper()}")
    for reason in row.reasons:
        say(f"  - {reason}")
    return row.status


def needed_failures(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.failed_a_check]


def _reached(records: list[RequestRecord], run: RunDir) -> None:
    """Exit 3 when no request reached the server: a run of nothing but refused connections measured
    nothing."""
    if records and all(r.error is not None and r.error.kind == "connect" for r in records):
        first = records[0].error.message if records[0].error else ""
        raise ServerUnreachable(
            f"no request reached the server (--url): {first}; start it or fix --url "
            f"(the failed requests are recorded in {run.requests_path})"
        )


TokenizerOption = Annotated[
    Path | None,
    typer.Option(
        help="Hugging Face tokenizer.json or model directory (preferred for counting), or 'server' to "
        "count with the server's own /tokenize (a directory named server: ./server)."
    ),
]


GgufOption = Annotated[Path | None, typer.Option(help="Count with the vocabulary inside this GGUF file.")]


CorpusOption = Annotated[Path | None, typer.Option(help="Directory of your own .txt files for the haystack.")]


CampaignOption = Annotated[str, typer.Option(help="Campaign name; part of every request's seed.")]


ReadTimeoutOption = Annotated[
    float,
    typer.Option(
        "--read-timeout",
        min=0.001,
        help="Seconds of silence between two bytes of an answer before the request is recorded as a timeout "
        "(a stream that never ends; a prefill of a million tokens can be silent for minutes).",
    ),
]


LimitOption = Annotated[int | None, typer.Option(help="Context limit, if the server does not state one.")]


def parse_token_count(text: str, flag: str | None = None) -> int:
    """`8192`, `8K` (8192), `1M` (1048576), `1.5K`: the campaign files' rule (`params.token_count`)."""
    from ..config.param_types import token_count

    try:
        return token_count(text)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a token count; write 8192, 8K or 1M.", param_hint=flag
        ) from None


def _counter_and_limit(url: str, model: str, tokenizer: Path | None, gguf: Path | None, limit: int | None):
    from ..engines.limits import ContextLimit, read_context_limit
    from ..text.tokens import load_token_counter

    counter = load_token_counter(tokenizer, gguf, url, model)
    stated = ContextLimit(limit, "--limit") if limit is not None else read_context_limit(url, model=model)
    console.print(f"tokenizer: {counter.source}; context limit {stated.tokens} ({stated.source})")
    return counter, stated
