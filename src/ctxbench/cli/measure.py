"""The ad-hoc checks against a running server: probe, capacity, needle, ramp, quality."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import event_loop
from ..checks.probe import probe_request_count, run_probe
from ..client import Client, Timeouts
from ..param_types import DEFAULT_READ_TIMEOUT_S
from ..params import CapacityParams, FidelityParams, NeedleParams, ProbeParams, QualityParams, RampParams
from ..records import RequestRecord
from .common import (
    CampaignOption,
    CorpusOption,
    GgufOption,
    LimitOption,
    ModelOption,
    ReadTimeoutOption,
    ResultsOption,
    TokenizerOption,
    UrlOption,
    _adhoc_run,
    _counter_and_limit,
    _finish,
    _print_records,
    _progress,
    app,
    console,
    say,
)
from .param_flags import params_flags


@app.command()
@params_flags(ProbeParams, "max_tokens", "concurrency")
def probe(
    url: UrlOption,
    model: ModelOption,
    spec: ProbeParams,
    results: ResultsOption = Path("results"),
    read_timeout: ReadTimeoutOption = DEFAULT_READ_TIMEOUT_S,
) -> None:
    """Send a few streamed chat requests (alone, then concurrently); record TTFT, decode rate, tokens."""
    run = _adhoc_run(results, model, "probe", deployment=url, model=model)

    async def main() -> list[RequestRecord]:
        with _progress() as progress:
            task = progress.add_task("requests", total=probe_request_count(spec))
            async with Client(
                url, model, on_interrupted=run.append, timeouts=Timeouts(read_s=read_timeout)
            ) as client:
                return await run_probe(client, spec, run, lambda _: progress.advance(task))

    _print_records(event_loop.run(main()))
    say(f"records: {run.requests_path}")
    _finish(run, results)


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
    read_timeout: ReadTimeoutOption = DEFAULT_READ_TIMEOUT_S,
) -> None:
    """Claim 1: a fresh prompt near the server's limit is accepted, and one over it is cleanly rejected."""
    from ..checks.capacity import run_capacity
    from ..text.haystack import pool_for

    counter, stated = _counter_and_limit(url, model, tokenizer, gguf, limit)
    with console.status("tokenizing the corpus once"):
        pool = pool_for(counter, stated.tokens, corpus)
    run = _adhoc_run(results, model, "capacity", deployment=url, model=model, tokenizer=counter.source)

    async def main() -> None:
        async with Client(
            url, model, on_interrupted=run.append, timeouts=Timeouts(read_s=read_timeout)
        ) as client:
            with console.status("sending a prompt near the limit, then one over it"):
                await run_capacity(client, pool, stated, CapacityParams(), run, (campaign, url, run.run_id))

    try:
        event_loop.run(main())
    finally:
        counter.close()
    _finish(run, results)


@app.command()
@params_flags(
    NeedleParams, "task", "lengths", "depths", "max_tokens", "control", "distractors", "values", "hops"
)
def needle(
    url: UrlOption,
    model: ModelOption,
    asked: NeedleParams,
    force: Annotated[
        bool, typer.Option(help="Send lengths over the server's limit instead of skipping them.")
    ] = False,
    tokenizer: TokenizerOption = None,
    gguf: GgufOption = None,
    corpus: CorpusOption = None,
    limit: LimitOption = None,
    campaign: CampaignOption = "adhoc",
    results: ResultsOption = Path("results"),
    read_timeout: ReadTimeoutOption = DEFAULT_READ_TIMEOUT_S,
) -> None:
    """Claim 2: a fact planted in a fresh document at each depth, asked for at each length, after the same
    task at a short length (the control)."""
    from ..checks.needle import log_line, run_needle
    from ..text.haystack import pool_for

    counter, stated = _counter_and_limit(url, model, tokenizer, gguf, limit)
    sizes = tuple(asked.lengths) or (stated.tokens - asked.max_tokens - 16,)
    with console.status("tokenizing the corpus once"):
        pool = pool_for(counter, max(sizes), corpus)
    spec = asked.model_copy(update={"lengths": list(sizes)})
    run = _adhoc_run(
        results,
        model,
        "needle",
        deployment=url,
        model=model,
        tokenizer=counter.source,
        check_parameters={"needle": spec.model_dump(mode="json"), "force": force},
    )

    async def main() -> None:
        with _progress() as progress:
            task = progress.add_task("needle prompts", total=spec.trial_count())

            def done(trial) -> None:
                progress.console.print(log_line(trial), highlight=False)
                progress.advance(task)

            async with Client(
                url, model, on_interrupted=run.append, timeouts=Timeouts(read_s=read_timeout)
            ) as client:
                scope = (campaign, url, run.run_id)
                await run_needle(client, pool, spec, run, scope, stated.tokens, done, force=force)

    try:
        event_loop.run(main())
    finally:
        counter.close()
    console.print(f"niah.log: {run.path / 'niah.log'}")
    _finish(run, results)


@app.command()
@params_flags(
    RampParams,
    "start",
    "end",
    "turns",
    "schedule",
    "users",
    "stagger_s",
    "max_tokens",
    "on_failure",
    "task",
    "distractors",
)
def ramp(
    url: UrlOption,
    model: ModelOption,
    spec: RampParams,
    deployment: Annotated[str | None, typer.Option(help="Name for ramp1m.csv (default: the model).")] = None,
    tokenizer: TokenizerOption = None,
    gguf: GgufOption = None,
    corpus: CorpusOption = None,
    campaign: CampaignOption = "adhoc",
    results: ResultsOption = Path("results"),
    read_timeout: ReadTimeoutOption = DEFAULT_READ_TIMEOUT_S,
) -> None:
    """Claim 3: conversations growing turn by turn, alone and beside other users; recall and decode stall."""
    from ..checks.ramp import run_ramp
    from ..ramp_table import RAMP_TABLE
    from ..text.haystack import pool_for
    from ..text.tokens import load_token_counter

    name = deployment or model
    counter = load_token_counter(tokenizer, gguf, url, model)
    with console.status("tokenizing the corpus once"):
        pool = pool_for(counter, spec.end, corpus)
    run = _adhoc_run(
        results,
        name,
        "ramp",
        deployment=name,
        model=model,
        url=url,
        tokenizer=counter.source,
        check_parameters={"ramp": spec.model_dump(mode="json")},
    )

    async def main() -> None:
        with _progress() as progress:
            task = progress.add_task("turns", total=spec.turns * sum(spec.users))

            def done(turn) -> None:
                progress.console.print(
                    f"users={turn.users} user={turn.user} turn={turn.turn} target={turn.target_tokens} "
                    + (f"FAILED {turn.error}" if turn.error else f"recall={'yes' if turn.recall else 'no'}"),
                    highlight=False,
                )
                progress.advance(task)

            async with Client(
                url, model, on_interrupted=run.append, timeouts=Timeouts(read_s=read_timeout)
            ) as client:
                await run_ramp(
                    client,
                    pool,
                    spec,
                    run,
                    (campaign, name, run.run_id),
                    deployment=name,
                    table=results / RAMP_TABLE,
                    on_turn=done,
                )

    try:
        event_loop.run(main())
    finally:
        counter.close()
    console.print(f"table: {results / RAMP_TABLE}")
    _finish(run, results)


@app.command()
@params_flags(
    FidelityParams, "lengths", "max_tokens", "top_logprobs", "paths", "load_users", "drift_tolerance"
)
def fidelity(
    url: UrlOption,
    model: ModelOption,
    spec: FidelityParams,
    tokenizer: TokenizerOption = None,
    gguf: GgufOption = None,
    corpus: CorpusOption = None,
    campaign: CampaignOption = "adhoc",
    results: ResultsOption = Path("results"),
    read_timeout: ReadTimeoutOption = DEFAULT_READ_TIMEOUT_S,
) -> None:
    """Cache fidelity: one fresh document a length, cold twice, then warm, partly cached and under load, each
    answer compared token by token with its cold one (docs/metrics.md, "Cache fidelity")."""
    from ..checks.fidelity import run_fidelity
    from ..text.haystack import pool_for
    from ..text.tokens import load_token_counter

    counter = load_token_counter(tokenizer, gguf, url, model)
    with console.status("tokenizing the corpus once"):
        pool = pool_for(counter, max(spec.lengths), corpus)
    run = _adhoc_run(
        results,
        model,
        "fidelity",
        model=model,
        url=url,
        tokenizer=counter.source,
        check_parameters={"fidelity": spec.model_dump(mode="json")},
    )

    async def main() -> None:
        with _progress() as progress:
            task = progress.add_task("requests", total=spec.request_count())
            async with Client(
                url, model, on_interrupted=run.append, timeouts=Timeouts(read_s=read_timeout)
            ) as client:
                found = await run_fidelity(
                    client, pool, spec, run, (campaign, model, run.run_id), lambda _: progress.advance(task)
                )
        for length in found.lengths:
            for path in length.paths:
                say(f"fidelity {length.length} tokens, {path.path}: {path.text}")

    try:
        event_loop.run(main())
    finally:
        counter.close()
    _finish(run, results)


@app.command()
@params_flags(QualityParams, "data", "samples", "fewshot", "endpoint", "max_tokens", "concurrency")
def quality(
    url: UrlOption,
    model: ModelOption,
    spec: QualityParams,
    deployment: Annotated[
        str | None, typer.Option(help="Name in quality.jsonl (default: the model).")
    ] = None,
    results: ResultsOption = Path("results"),
    read_timeout: ReadTimeoutOption = DEFAULT_READ_TIMEOUT_S,
) -> None:
    """GSM8K accuracy, scored as lm-evaluation-harness does (strict and flexible), with Wilson 95%
    intervals."""
    from ..checks.quality import load_problems, run_quality

    load_problems(spec.data)
    name = deployment or model
    run = _adhoc_run(
        results,
        name,
        "quality",
        deployment=name,
        model=model,
        url=url,
        check_parameters={"quality": spec.model_dump(mode="json")},
    )

    async def main() -> dict:
        with _progress() as progress:
            task = progress.add_task("problems", total=spec.samples)
            async with Client(
                url, model, on_interrupted=run.append, timeouts=Timeouts(read_s=read_timeout)
            ) as client:
                return await run_quality(
                    client, spec, run, results, deployment=name, on_sample=lambda _: progress.advance(task)
                )

    line = event_loop.run(main())
    for scoring in ("strict", "flexible"):
        figures = line[scoring]
        if figures["accuracy"] is None:  # nothing answered: no accuracy, never 0/0
            say(f"{scoring}: not scored ({line['failed']} request(s) failed, none answered)")
            continue
        accuracy = f"{figures['accuracy']:.3f} [{figures['low']:.3f}, {figures['high']:.3f}]"
        say(f"{scoring}: {figures['correct']}/{line['n']} = {accuracy} (Wilson 95%)")
    console.print(f"{line['failed']} failed request(s); samples: {results / 'quality' / 'quality.jsonl'}")
    _finish(run, results)
