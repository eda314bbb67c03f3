"""The evidence table: one row per deployment, rebuilt from a results directory alone.

Each claim keeps its own column (capacity, retrieval, conversation recall alone and with other users),
beside speed (last-turn TTFT and decode, alone and with 2 users, the stall), cost per million tokens,
and a validation status computed by the written rules of docs/validation.md. Every cell carries the
file it came from. Evidence, not a ranking: nothing here orders deployments by a single score.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from ..checks.base import Judgement
from ..checks.catalog import CHECKS
from ..engines.chat_template import template_warnings
from ..measure import metrics
from ..records import RequestRecord, not_planned_head
from ..render.cell import MISSING, Cell, clause
from ..store.cost import price_of
from ..store.run_dir import RunDir
from ..store.run_files import MANIFEST_FILE

Status = Literal["validated", "provisional", "failed"]


@dataclass(frozen=True)
class Row:
    deployment: str
    run_id: str
    gpus: int
    random_weights: bool
    status: Status = "provisional"
    reasons: tuple[str, ...] = field(default_factory=tuple)
    # the cells of the checks whose folder holds them (`Check.cells`), by column key
    own: Mapping[str, Cell] = field(default_factory=dict)

    def cell(self, key: str) -> Cell:
        """The cell of column `key` (MISSING where the run has none)."""
        if key in _FIELD_CELLS:
            cell: Cell = getattr(self, key)
            return cell
        return self.own.get(key, MISSING)


_FIELD_CELLS = frozenset(f.name for f in fields(Row) if f.type in ("Cell", Cell))


def _rel(results: Path, path: Path) -> str:
    return str(path.relative_to(results))


def evidence_row(results: Path, run: RunDir, price_per_gpu_hour: float | None = None) -> Row:
    """One deployment's row from one run directory; status by `status_of`. Every cost in it is at one price
    (`price_of`)."""
    manifest = run.manifest()
    price = price_of(manifest, price_per_gpu_hour)
    cells: dict[str, Cell] = {}
    facts = Facts(checks=set(manifest.checks), failed=manifest.failed.error if manifest.failed else None)
    if not manifest.checks and manifest.check:
        facts.adhoc = manifest.check
    records = list(run.records())
    facts.implausible = sum(1 for r in records if metrics.implausible(r) is not None)
    facts.not_planned = [
        r.error.message for r in records if r.error is not None and r.error.kind == "prompt_not_planned"
    ]
    facts.refused = refusals(records)
    facts.template_warnings = template_warnings(manifest.chat_template or {})
    facts.token_fallback = any(
        (out := metrics.output_tokens(r)) is not None and out.source != "usage" for r in records if r.ok
    )
    gpus = manifest.gpus
    own = {key: cell for check in CHECKS for key, cell in check.cells(results, run, price).items()}
    facts.judgements = [check.judge(run, manifest.random_weights) for check in CHECKS]
    from ..audits.prefix_cache import audit_run

    audit = audit_run(run)
    facts.cache_findings = len(audit.findings)
    status, reasons = status_of(facts, random_weights=manifest.random_weights)
    return Row(
        deployment=manifest.deployment if manifest.deployment is not None else run.run_id,
        run_id=run.run_id,
        gpus=gpus,
        random_weights=manifest.random_weights,
        status=status,
        reasons=reasons,
        own=own,
        **cells,
    )


@dataclass
class Facts:
    """What the status rules read (docs/validation.md), gathered while a row's cells are built; a fact no
    check gave keeps its default."""

    checks: set[str] = field(default_factory=set)
    failed: str | None = None  # the deployment's failure, as the manifest says it
    adhoc: str | None = None  # the one check an ad-hoc command ran
    implausible: int = 0  # records whose timing cannot be true
    not_planned: list[str] = field(default_factory=list)
    refused: list[RequestRecord] = field(default_factory=list)
    template_warnings: list[str] = field(default_factory=list)
    token_fallback: bool = False
    judgements: list[Judgement] = field(default_factory=list)  # the checks that judge their own results
    cache_findings: int = 0


def refusals(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The requests the server refused (`refused_by_server`) that count against the deployment: not those of
    a check that counts its own refusals (`Check.counts_refusals`: a replayed trace's over-long lines)."""
    counting = {check.name for check in CHECKS if check.counts_refusals}
    return [r for r in records if r.refused_by_server and r.check not in counting]


def status_of(facts: Facts, *, random_weights: bool) -> tuple[Status, tuple[str, ...]]:
    """The written rules of docs/validation.md, in order. Failed beats provisional beats validated."""
    reasons: list[str] = []
    if facts.failed is not None:
        first = (facts.failed.splitlines() or [""])[0].split(" Command: ")[0]
        return "failed", (f"the deployment failed: {clause(first, 400)}",)
    if facts.not_planned:
        return "failed", (
            f"{len(facts.not_planned)} prompt(s) were not what was planned, first: "
            f"{not_planned_head(facts.not_planned[0])}; no figure or recall speaks for the planned lengths",
            *facts.template_warnings,
        )
    refused = facts.refused
    if refused:
        one = refused[0]
        said = clause(one.error.message if one.error else "", 160)
        by_check = Counter((r.check or "?") for r in refused)
        return "failed", (
            f"{len(refused)} request(s) refused by the server "
            f"({', '.join(f'{check} {n}' for check, n in sorted(by_check.items()))}), first "
            f"{one.request_id} (HTTP {one.http_status}): {said}; "
            "nothing measured speaks for what the server refused: fix what was sent and run again",
        )
    failed = [reason for judged in facts.judgements for reason in judged.failed]
    if failed:
        return "failed", tuple(failed)
    reasons += [reason for judged in facts.judgements for reason in judged.provisional]
    checks = facts.checks
    adhoc = facts.adhoc
    if adhoc:  # `ctxbench needle` and the like: one check asked for, the others not missing but not asked
        checks = {adhoc}
        reasons.append(f"the {adhoc} check alone (an ad-hoc command): the other claims were not checked")
    else:
        for claim in CHECKS:
            if claim.claim and claim.name not in checks:
                reasons.append(f"the {claim.name} check did not run")
    reasons += [reason for judged in facts.judgements for reason in judged.results]
    if facts.cache_findings:
        reasons.append(f"the cache audit has {facts.cache_findings} finding(s) (`ctxbench audit-cache`)")
    if facts.implausible:
        reasons.append(
            f"{facts.implausible} record(s) have a timing that cannot be true, left out of every figure "
            "(the run report names them)"
        )
    if facts.token_fallback:
        reasons.append("some token counts came from a fallback, not the server's usage")
    reasons.extend(facts.template_warnings)
    if random_weights:
        reasons.append("random weights: recall is noise")
    return ("provisional" if reasons else "validated"), tuple(reasons)


def collect(results: Path, price_per_gpu_hour: float | None = None) -> list[Row]:
    """Every run under `results/runs` that has a manifest, oldest first."""
    runs = sorted(p.parent for p in (results / "runs").glob(f"*/{MANIFEST_FILE}"))
    return [evidence_row(results, RunDir(path), price_per_gpu_hour) for path in runs]
