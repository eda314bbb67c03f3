"""Campaigns and their files: demo, run, report, export, audit-cache, sample-trace."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..config.deployments import DEFAULT_PRICE_PER_GPU_HOUR
from ..errors import EXIT_FAILED, EXIT_UNREACHABLE, UsageError
from ..report.run_page import write_run_report
from ..results.exports import EXPORTERS, FORMATS, exporter, writing
from ..store.counters import reported_text
from ..store.run_dir import RunDir
from .common import (
    ResultsOption,
    _progress,
    _results_flag,
    app,
    console,
    print_verdict,
    results_dir_problem,
    say,
)
from .progress import RequestTally

if TYPE_CHECKING:
    pass


@app.command()
def demo(
    results: ResultsOption = Path("results"),
) -> None:
    """Run the demo campaign (SmolLM2 on the embedded llama-server, every check) and write its report.

    An interrupted demo resumes where it stopped when run again; a finished one is run anew."""
    from ..campaigns.demo import demo_campaign

    campaign = demo_campaign()
    _run_campaign(campaign, results, [], force=True)


@app.command()
def run(
    campaign_file: Annotated[Path, typer.Argument(help="The campaign file (TOML); examples/ has two.")],
    deployment: Annotated[
        list[str] | None,
        typer.Option("--deployment", "-d", help="Run only this deployment (repeat for several)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the exact commands and the plan; start nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option(help="Run deployments that finished earlier again, in new runs.")
    ] = False,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results", help="Results directory (default: the file's `results`).", callback=_results_flag
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Run each deployment as a task on this Ray cluster (host:port, or 'auto'); results come "
            "back here as they are written (docs/distributed.md). Needs pip install 'ctxbench[ray]'.",
        ),
    ] = None,
) -> None:
    """Run a campaign: per deployment, start it, run the checks, stop it. Rerun to resume."""
    from ..campaigns.campaign_file import load_campaign, require_cluster_for_actors
    from ..campaigns.preflight import dry_run as plan_lines
    from ..campaigns.preflight import preflight

    campaign = load_campaign(campaign_file, check_paths=not dry_run)
    if dry_run:
        lines = plan_lines(campaign, deployment or [], results)
        for line in lines:
            say(line)
        # Then what a run on this machine checks before anything starts: a refusal exits 2 here too.
        preflight(load_campaign(campaign_file), campaign.select(deployment or []))
        warned = sum(line.lstrip().startswith("warning:") for line in lines)
        say(
            f"\n{warned} warning(s) above; nothing a run refuses before it starts"
            if warned
            else "\nnothing a run checks before it starts is wrong on this machine"
        )
        return
    if not ray:
        require_cluster_for_actors(campaign_file, campaign, deployment or [])
    if results is None and (problem := results_dir_problem(campaign.campaign.results)) is not None:
        raise UsageError(f"{campaign_file}: campaign.results: {problem}")
    _run_campaign(campaign, results or campaign.campaign.results, deployment or [], force=force, ray=ray)


def _run_campaign(campaign, results: Path, names: list[str], *, force: bool, ray: str | None = None) -> None:
    from ..campaigns.campaign import run_campaign
    from ..campaigns.distributed import run_campaign_on_ray
    from ..checks.catalog import request_count
    from ..report.campaign import write_campaign_report

    selected = campaign.select(names)
    planned = {d.name: request_count(campaign.checks_for(d)) for d in selected}
    with _progress() as progress:
        task = progress.add_task("requests", total=sum(planned.values()) * campaign.campaign.repeats)
        tally = RequestTally(progress, task, planned)
        status = lambda m: progress.console.print(m, highlight=False, markup=False)  # noqa: E731
        outcomes = (
            run_campaign_on_ray(campaign, ray, results=results, names=names, force=force, on_status=status)
            if ray
            else run_campaign(
                campaign,
                results=results,
                names=names,
                force=force,
                on_status=status,
                on_request_done=tally.done,
                on_outcome=lambda outcome: tally.ended(outcome.deployment),
            )
        )
    verdicts = []
    for outcome in outcomes:
        run = RunDir(results / "runs" / outcome.run_id) if outcome.run_id else None
        if run is not None and (run.path / "manifest.json").exists():
            say(f"\n{outcome.deployment}: {outcome.status}")
            write_run_report(run)
            verdicts.append(print_verdict(run, results))
            say(f"run report: {run.path / 'report.md'}")
        else:
            say(f"\n{outcome.deployment}: {outcome.status}" + (f": {outcome.error}" if outcome.error else ""))
    markdown_path, html_path = write_campaign_report(results)  # each run at the price its manifest recorded
    say(f"evidence:   {markdown_path}\n            {html_path}")
    if outcomes and all(o.status == "failed" and o.exit_code == EXIT_UNREACHABLE for o in outcomes):
        raise typer.Exit(code=EXIT_UNREACHABLE)  # no deployment could be reached: nothing was measured
    if any(o.status == "failed" for o in outcomes) or "failed" in verdicts:
        raise typer.Exit(code=EXIT_FAILED)  # a deployment failed, or its evidence did (docs/validation.md)


@app.command()
def report(
    results: ResultsOption = Path("results"),
    price: Annotated[
        float | None,
        typer.Option(
            help="Price per GPU-hour for every cost, instead of the one "
            "each run recorded (its campaign's, else "
            f"{DEFAULT_PRICE_PER_GPU_HOUR:.2f}).",
            min=0.0,
        ),
    ] = None,
) -> None:
    """Rebuild every run's report.md and the evidence report (report.md, report.html) from files alone."""
    from ..report.campaign import write_campaign_report

    runs = sorted((results / "runs").glob("*/manifest.json"))
    if not runs:
        raise UsageError(
            f"no runs under {results / 'runs'} (--results): run `ctxbench demo` or "
            "`ctxbench probe` first, or give the results directory that holds them"
        )
    for manifest in runs:
        run = RunDir(manifest.parent)
        write_run_report(run, price)
        console.print(f"rebuilt {run.path / 'report.md'}")
    markdown_path, html_path = write_campaign_report(results, price)
    console.print(f"evidence: {markdown_path}\n          {html_path}")


@app.command()
def export(
    out: Annotated[
        Path | None,
        typer.Option(
            help=f"The file ({writing('file')}) or the directory ({writing('directory')}) to write."
        ),
    ] = None,
    results: ResultsOption = Path("results"),
    kind: Annotated[
        str,
        typer.Option("--format", help="; ".join(f"{e.name}: {e.what}" for e in EXPORTERS.values()) + "."),
    ] = "summary",
    llmd_version: Annotated[
        str,
        typer.Option(
            "--llmd-version",
            help="llm-d-report: the report version to write, 0.2 or 0.2.1 (adds the sessions of multi-turn "
            "stages).",
        ),
    ] = "0.2",
    schema: Annotated[bool, typer.Option(help="Print the summary's JSON schema and stop.")] = False,
) -> None:
    """Write the runs under --results in a format other tools read (docs/results-format.md, "Exports")."""
    import json

    from ..results.summary import Summary

    if schema:
        print(json.dumps(Summary.model_json_schema(), indent=2))
        return
    chosen = exporter(kind)
    if chosen is None:
        raise UsageError(f"--format {kind!r}: give {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    if llmd_version not in ("0.2", "0.2.1"):
        raise UsageError(f"--llmd-version {llmd_version!r}: give 0.2 or 0.2.1")
    if out is None:
        raise UsageError(f"--out: give the {chosen.out_is} to write ({chosen.name})")
    if not list((results / "runs").glob("*/manifest.json")):
        raise UsageError(f"no runs under {results / 'runs'} (--results): give the directory that holds them")
    console.print(chosen.write(results, out, "0.2.1" if llmd_version == "0.2.1" else "0.2"))


@app.command("audit-cache")
def audit_cache(
    results: Annotated[Path, typer.Argument(help="Results directory to audit.")] = Path("results"),
) -> None:
    """Hold every request to the cache intent its check declared: hits beyond it, prefills too fast to be
    real, undeclared requests, an id twice; reconcile with the engine's /metrics counter."""
    from ..audits.prefix_cache import audit_run

    runs = sorted((results / "runs").glob("*/manifest.json"))
    if not runs:
        raise UsageError(
            f"no runs under {results / 'runs'} (RESULTS_DIR): nothing to audit; give "
            "the results directory of a finished run"
        )
    total = 0
    for manifest in runs:
        audit = audit_run(RunDir(manifest.parent))
        total += len(audit.findings)
        rate = audit.median_prefill_tokens_per_s
        console.print(
            f"{audit.run_id}: {audit.audited_requests} requests held to their declared reuse "
            f"({audit.fresh_requests} fresh), {audit.unbounded_requests} declared unbounded; median prefill "
            f"{'n/a' if rate is None else f'{rate:.0f} tokens/s'}; cached tokens in usage "
            f"{reported_text(audit.records_cached_tokens)}, "
            "engine counter "
            f"{'n/a' if audit.metrics_cached_tokens is None else f'{audit.metrics_cached_tokens:.0f}'}; "
            f"{len(audit.findings)} finding(s)",
            highlight=False,
        )
        for finding in audit.findings:
            console.print(f"  {finding.kind} {finding.request_id}: {finding.detail}", highlight=False)
        for bound in audit.counter_bounds:
            allowed = "not bounded (a request's reuse has none)" if bound.allowed is None else bound.allowed
            console.print(
                f"  {bound.check} (attempt {bound.attempt}): the engine's prefix-cache hits "
                f"{bound.engine_hits:.0f}, its {bound.requests} request(s) allowed {allowed}",
                highlight=False,
            )
        for users, ratio in sorted(audit.ramp_hit_ratio.items()):
            console.print(
                f"  ramp, {users} user(s): {ratio:.1%} of the intended history came back from the cache "
                "(intended reuse)",
                highlight=False,
            )
        if audit.trace_expected_tokens is not None:
            console.print(
                f"  trace: {reported_text(audit.trace_reported_tokens)} cached tokens in usage, "
                f"{audit.trace_expected_tokens} implied by its shared blocks (an unbounded cache; the chat "
                "template's opening comes on top)",
                highlight=False,
            )
    raise typer.Exit(code=1 if total else 0)


@app.command("sample-trace")
def sample_trace_file(
    out: Annotated[Path, typer.Argument(help="Where to write the Mooncake-format JSONL trace.")],
    block_tokens: Annotated[int, typer.Option(min=1, help="Tokens a hash id stands for.")] = 512,
    output_tokens: Annotated[int, typer.Option(min=1, help="output_length of every request.")] = 128,
    span: Annotated[float, typer.Option(min=1.0, help="Seconds the trace spans.")] = 120.0,
) -> None:
    """Write a sample trace shaped like long-context traffic (shared documents, conversations that come
    back, fresh prompts) for `[checks.trace]`; examples/mooncake-sample.jsonl was made by this command."""
    import json

    from ..checks.trace import sample_trace

    if out.is_dir() or not out.absolute().parent.is_dir():
        where = "is a directory" if out.is_dir() else "is in a directory that does not exist"
        raise UsageError(f"{out} (the trace to write) {where}; give a file path such as trace.jsonl")
    lines = sample_trace(block_tokens=block_tokens, output_length=output_tokens, span_s=span)
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    console.print(f"{out}: {len(lines)} requests over {lines[-1]['timestamp'] / 1000:.0f} s", highlight=False)
