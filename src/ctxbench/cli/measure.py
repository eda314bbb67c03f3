"""The ad-hoc checks against a running server: probe, capacity, needle, ramp, fidelity, quality. Each runs its
check's own `run(ctx, params)` (cli/adhoc.py), the one the suite runs; a command adds only its flags and what
it prints after."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..checks.capacity import CAPACITY, CapacityParams
from ..checks.fidelity import FIDELITY, FidelityParams
from ..checks.needle import NEEDLE, NeedleParams
from ..checks.probe import PROBE, ProbeParams
from ..checks.quality import QUALITY, QualityParams, load_problems
from ..checks.ramp import RAMP, RampParams
from ..config.param_types import DEFAULT_READ_TIMEOUT_S
from .adhoc import Server, run_check
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
    _counter_and_limit,
    _finish,
    _print_records,
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
    run = run_check(PROBE, spec, Server(url, model, results, read_timeout))
    _print_records(list(run.records()))
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
    counter, stated = _counter_and_limit(url, model, tokenizer, gguf, limit)
    server = Server(url, model, results, read_timeout, campaign)
    run = run_check(CAPACITY, CapacityParams(), server, counter=counter, limit=stated, corpus=corpus)
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
    counter, stated = _counter_and_limit(url, model, tokenizer, gguf, limit)
    spec = NEEDLE.resolved(asked.model_copy(update={"over_limit": force}), stated.tokens)
    server = Server(url, model, results, read_timeout, campaign)
    run = run_check(NEEDLE, spec, server, counter=counter, limit=stated, corpus=corpus, unit="needle prompts")
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
    from ..checks.ramp import RAMP_TABLE
    from ..text.tokens import load_token_counter

    counter = load_token_counter(tokenizer, gguf, url, model)
    server = Server(url, model, results, read_timeout, campaign, name=deployment)
    run = run_check(RAMP, spec, server, counter=counter, corpus=corpus, unit="turns")
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
    from ..text.tokens import load_token_counter

    counter = load_token_counter(tokenizer, gguf, url, model)
    server = Server(url, model, results, read_timeout, campaign)
    _finish(run_check(FIDELITY, spec, server, counter=counter, corpus=corpus), results)


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
    load_problems(spec.data)
    run = run_check(
        QUALITY, spec, Server(url, model, results, read_timeout, name=deployment), unit="problems"
    )
    console.print(f"samples: {results / 'quality' / 'quality.jsonl'}")
    _finish(run, results)
