"""What every check is (`Check`) and what it is given to run (`RunContext`).

A check is one object in its own module: the name of its `[checks.<name>]` table and its parameters'
type, the requests it sends and the longest prompt among them (for progress and the document pool), the
line it announces, whether it is still to do on a resumed run, and `run(ctx, params)`. The suite runs
`checks.catalog.CHECKS` in order and knows nothing else about any one check.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from ..client.chat import ChatClient
from ..config.param_types import Strict
from ..engines.limits import ContextLimit
from ..errors import UsageError
from ..records import RequestRecord
from ..render.cell import Cell, Glance
from ..render.column import Column
from ..render.figure_layout import PageRun
from ..render.run_read import RunRead
from ..store.run_dir import RunDir
from ..text.haystack import UnitPool
from ..text.tokens import TokenCounter

P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class LocalFile:
    """A local file a check's table names: its `key`, the `path`, what to give `instead` when it is missing,
    and whether a directory holding it will do (a data set's cache)."""

    key: str
    path: Path
    instead: str
    directory_ok: bool = False

    def problem(self) -> str | None:
        """What is wrong with it here, or None."""
        path = self.path.expanduser()
        if self.directory_ok:
            return None if path.exists() else f"{str(self.path)!r} does not exist"
        return None if path.is_file() else f"{str(self.path)!r} is not a file"


@dataclass(frozen=True)
class StageLoad:
    """The load a stage of a check was given by design. `rate_qps`: requests a second offered (an open-loop
    rate, a trace's arrivals); `users`: concurrent users (a closed loop); neither: the export states the
    most requests the stage had in flight. `prefix_tokens` shared by `prefix_users` by design; `turns`: the
    most turns a conversation has (None: single requests); `sampled`: prompts from the user's data."""

    rate_qps: float | None = None
    users: int | None = None
    prefix_tokens: int = 0
    prefix_users: int = 1
    turns: int | None = None
    sampled: bool = False


@dataclass(frozen=True)
class Judgement:
    """What a check's own results say of a run's status (docs/validation.md): any `failed` reason fails the
    run; `provisional` and `results` reasons keep it from VALIDATED. `provisional` reasons come first (what
    the engine did: not bit for bit, a cached path that flipped); `results` come after the claims the run
    left unchecked (a recall below n/n, prompts skipped, a count off within the tolerance)."""

    failed: tuple[str, ...] = ()
    provisional: tuple[str, ...] = ()
    results: tuple[str, ...] = ()


class CheckTables(Strict):
    """The campaign file's `[checks.*]` tables: a field a check, named by the check and typed by its
    parameters (None: the campaign does not run it). `checks.catalog.Checks` is this model with a field for
    each of `CHECKS`; code reads one check's table through `of`, typed by the check."""

    def of(self, check: Check[P]) -> P | None:
        params: P | None = getattr(self, check.name)
        return params


@dataclass
class RunContext:
    """One run of a deployment, as each check sees it: the client (one server or a router over its
    replicas), the document pool sized for the longest prompt, the stated limit, the run directory and
    the campaign's results directory, the seed scope, and how to report progress and read `/metrics`."""

    client: ChatClient
    make_pool: Callable[[], UnitPool]  # built on first use: a run that counts no tokens builds none
    counter: TokenCounter
    limit: ContextLimit | None  # None: the server states none and no check needs one
    run: RunDir
    results: Path
    scope: tuple[str, ...]
    deployment: str
    force: bool  # a resumed run measures finished units again
    snapshot: Callable[[str, str], None]  # (unit, "before" | "after"): every replica's /metrics, recorded
    on_request_done: Callable[[], None]
    say: Callable[[str], None] = lambda _line: None  # a line for the console as the check goes (a trial's)

    @functools.cached_property
    def pool(self) -> UnitPool:
        return self.make_pool()

    @property
    def stated(self) -> int:
        """The stated limit in tokens; 0 where none is stated."""
        return self.limit.tokens if self.limit else 0

    def require_limit(self, check: str) -> ContextLimit:
        if self.limit is None:
            raise UsageError(
                f"the {check} check needs a context limit: set limit_tokens = N in the deployment's table"
            )
        return self.limit

    def advance(self, _done: Any = None) -> None:
        """One request ended: given as any check's per-request callback (its argument is not needed)."""
        self.on_request_done()


class Check(Protocol[P]):
    """One kind of check. `name` is its `[checks.<name>]` table, the unit a resumed run skips when the
    whole check finished, and the tag on its telemetry and `/metrics` snapshots."""

    name: str
    params_type: type[P]
    needs_limit: bool  # refused on a server that states no context limit
    needs_counter: bool = True  # counts prompt tokens (False: a run of only such checks needs no tokenizer)
    claim: bool = False  # one of the three claims a VALIDATED run must have checked (docs/validation.md)
    counts_refusals: bool = (
        False  # the server's refusals are results it counts (a replayed trace's long lines)
    )
    fresh_only: bool = False  # every prompt fresh: the cache audit holds records without an intent to that

    def request_count(self, params: P) -> int:
        """Requests it sends, for the progress bar (0 where it cannot tell before it runs)."""
        ...

    def longest_prompt(self, params: P, limit_tokens: int) -> int | None:
        """Tokens in its longest prompt built from the document pool (None: it builds none)."""
        ...

    def stage(self, labels: Mapping[str, str]) -> str | None:
        """The stage of an export (results/llmd_report.py) one of its requests belongs to, by its labels:
        the requests one load produced. None for one no stage reports (a warm-up, a prompt refused by
        design)."""
        return self.name

    def conversation(self, labels: Mapping[str, str]) -> str | None:
        """The conversation one of its requests belongs to, by its labels, for an export's sessions (llm-d's
        `session_performance`); None for a request outside one."""
        return None

    def stage_load(self, parameters: Mapping[str, Any], records: Sequence[RequestRecord]) -> StageLoad:
        """The load one stage of it was given by design (an export's description of the stage: llm-d's
        `standardized` load), from the run's recorded parameters of the check and the stage's records."""
        return StageLoad()

    def pending(self, params: P, done: set[str]) -> bool:
        """Whether a run whose finished units are `done` has anything of it left to run. A check whose
        units are finer than itself (levels, users settings) says True and skips them as it runs."""
        return self.name not in done

    def announce(self, params: P, ctx: RunContext) -> str | None:
        """The line printed as it starts (None: nothing)."""
        ...

    def local_files(self, params: P) -> list[LocalFile]:
        """Each local file a run of it reads: the campaign file's reader refuses a missing one at its line
        before anything starts."""
        return []

    async def run(self, ctx: RunContext, params: P) -> None:
        """Send its requests and record everything in `ctx.run` as it goes. The suite marks the check
        completed once it returned and the engine is still alive; finer units it marks itself."""
        ...

    # What the reports read of it, all held in its folder (`checks/<name>/`: its section, its evidence columns
    # and cells, its console lines, its figures); the report, the evidence and the console take them from it.
    columns: tuple[Column, ...] = ()  # its evidence columns, in the table's order

    def section(self, read: RunRead) -> list[str]:
        """Its section of the run report (nothing where the run has none of it)."""
        return []

    def cells(self, results: Path, run: RunDir, price: float) -> dict[str, Cell]:
        """Its evidence cells, by column key (none where the run has none of it)."""
        return {}

    def console(self, run: RunDir) -> list[str]:
        """Its lines of the console summary as a run ends."""
        return []

    def glance(self, run: RunDir, cells: Mapping[str, Cell]) -> list[Glance]:
        """Its lines of the run's first screen where it has a written pass condition (a figure for the reader
        to judge is drawn from its column's `glance` instead); `cells` are its evidence cells."""
        return []

    def figures(self, results: Path, runs: Sequence[PageRun]) -> list[dict[str, Any]]:
        """Its figures on the evidence page (Plotly figure dicts), over every run the page draws."""
        return []

    def report_figures(self, results: Path, runs: Sequence[PageRun]) -> list[tuple[str, str, bytes]]:
        """Its figures in the evidence report's Markdown, drawn once: (caption, file name, PNG)."""
        return []

    def label(self, labels: Mapping[str, str]) -> str:
        """One of its requests in a few words, for a table of requests across checks (the calibration)."""
        return self.name

    def reuse_bound(self, records: Sequence[RequestRecord]) -> dict[str, int] | None:
        """Per request id, the most tokens any prefix cache could serve each of its requests, by a rule of its
        own that the run's records decide (None: the intents it declared when it sent them are the bound).
        The cache audit holds its requests to it (`reuse_beyond_rule`)."""
        return None

    def comparison(self, results: Path, run_a: str, run_b: str) -> list[tuple[str, str, str, str]]:
        """(figure, run a's, run b's, whether the difference is established) for two runs in `results`, in
        the evidence report's side-by-side comparisons (nothing where either has none of it)."""
        return []

    def judge(self, run: RunDir, random_weights: bool) -> Judgement:
        """What its results say of the run's status (nothing where the run has none of it)."""
        return Judgement()
