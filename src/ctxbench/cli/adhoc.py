"""An ad-hoc check against a server ctxbench did not launch: the same `Check.run(ctx, params)` the suite runs,
with the same request count (the progress bar), the same longest prompt (the document pool) and the same
default lengths, in a run directory of its own (`<stamp>-<name>-<check>`); its manifest names the check and
its parameters as a campaign's run does."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from .. import __version__
from ..checks.base import Check, RunContext
from ..client import event_loop
from ..client.stream import Client, Timeouts
from ..engines.limits import ContextLimit
from ..store.run_dir import RunDir, new_run_id, safe_name
from ..store.run_files import Manifest
from ..text.haystack import UnitPool
from ..text.tokens import NotCounting, TokenCounter
from .common import _progress, console

P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class Server:
    """The running server an ad-hoc check talks to, and where its results go."""

    url: str
    model: str
    results: Path
    read_timeout_s: float
    campaign: str = "adhoc"  # the seed scope's first part (`--campaign`)
    name: str | None = None  # the deployment's name in the results (default: the model)

    @property
    def deployment(self) -> str:
        return self.name or self.model


def run_check(
    check: Check[P],
    params: P,
    server: Server,
    *,
    counter: TokenCounter | None = None,
    limit: ContextLimit | None = None,
    corpus: Path | None = None,
    unit: str = "requests",
    manifest: dict[str, Any] | None = None,
) -> RunDir:
    """Run `check` once with `params` against `server`: the document pool built first where the check builds
    prompts from it, then a progress bar over its requests and its console lines as it goes. The command
    prints what it adds and calls `_finish` (the run report, the verdict, the evidence report). `counter`
    None: the check counts no tokens (the probe, quality)."""
    from ..text.haystack import pool_for

    name = server.deployment
    run = RunDir.create(server.results, new_run_id(safe_name(name), check.name))
    run.write_manifest(  # written first: an interrupted run is still a run
        Manifest(
            ctxbench_version=__version__,
            deployment=name,
            model=server.model,
            url=server.url,
            tokenizer=counter.source if counter is not None else None,
            check=check.name,
            check_parameters={check.name: params.model_dump(mode="json"), **(manifest or {})},
            started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            event_loop=event_loop.name(),
        )
    )
    longest = check.longest_prompt(params, limit.tokens if limit else 0)
    built = None
    if counter is not None and longest is not None:  # before the progress bar: one live display at a time
        with console.status("tokenizing the corpus once"):
            built = pool_for(counter, longest, corpus)

    def pool() -> UnitPool:
        if built is None:
            raise RuntimeError(f"the {check.name} check builds no prompt from the document pool")
        return built

    async def main() -> None:
        with _progress() as progress:
            task = progress.add_task(unit, total=check.request_count(params) or None)
            async with Client(
                server.url,
                server.model,
                on_interrupted=run.append,
                timeouts=Timeouts(read_s=server.read_timeout_s),
            ) as client:
                ctx = RunContext(
                    client=client,
                    make_pool=pool,
                    counter=counter if counter is not None else NotCounting(),
                    limit=limit,
                    run=run,
                    results=server.results,
                    scope=(server.campaign, name, run.run_id),
                    deployment=name,
                    force=False,
                    snapshot=lambda _unit, _phase: (
                        None
                    ),  # a server ctxbench did not launch: no /metrics asked
                    on_request_done=lambda: progress.advance(task),
                    say=lambda line: progress.console.print(line, markup=False, highlight=False),
                )
                if (line := check.announce(params, ctx)) is not None:
                    progress.console.print(line, markup=False, highlight=False)
                await check.run(ctx, params)

    try:
        event_loop.run(main())
    finally:
        if counter is not None:
            counter.close()
    return run
