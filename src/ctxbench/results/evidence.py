"""The evidence table: one row per deployment, rebuilt from a results directory alone.

Each claim keeps its own column (capacity, retrieval, conversation recall alone and with other users),
beside speed (last-turn TTFT and decode, alone and with 2 users, the stall), cost per million tokens,
and a validation status computed by the written rules of docs/validation.md. Every cell carries the
file it came from. Evidence, not a ranking: nothing here orders deployments by a single score.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from ..checks.base import Judgement
from ..checks.catalog import CHECKS
from ..engines.chat_template import template_warnings
from ..measure import decode_stall, metrics
from ..plan import cost_per_million
from ..records import RequestRecord, not_planned_head
from ..render.cell import MISSING, Cell, clause
from ..store.cost import price_of
from ..store.ramp_table import RAMP_TABLE, run_rows
from ..store.run_dir import RunDir
from ..store.run_files import MANIFEST_FILE

Status = Literal["validated", "provisional", "failed"]


@dataclass(frozen=True)
class Row:
    deployment: str
    run_id: str
    gpus: int
    random_weights: bool
    recall_alone: Cell = MISSING
    recall_shared: Cell = MISSING
    ttft_alone: Cell = MISSING
    ttft_shared: Cell = MISSING
    decode_alone: Cell = MISSING
    decode_shared: Cell = MISSING
    stall: Cell = MISSING
    cost: Cell = MISSING
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
    rows = run_rows(
        results / RAMP_TABLE,
        run.run_id,
        records,
        deployment=manifest.deployment or "",
        source_file=_rel(results, run.requests_path),
    )
    facts.implausible = sum(1 for r in records if metrics.implausible(r) is not None)
    facts.not_planned = [
        r.error.message for r in records if r.error is not None and r.error.kind == "prompt_not_planned"
    ]
    facts.refused = [r for r in records if r.refused_by_server]
    facts.template_warnings = template_warnings(manifest.chat_template or {})
    facts.token_fallback = any(
        (out := metrics.output_tokens(r)) is not None and out.source != "usage" for r in records if r.ok
    )
    gpus = manifest.gpus
    for users, suffix in ((1, "alone"), (2, "shared")):
        mine = [r for r in rows if r["users"] == str(users)]
        if not mine:
            continue
        scored = [r for r in mine if r["recall"]]
        k = sum(int(r["recall"]) for r in scored)
        cells[f"recall_{suffix}"] = Cell(f"{k}/{len(scored)}", RAMP_TABLE, scored=(k, len(scored)))
        facts.ramp_with_two_users = facts.ramp_with_two_users or users == 2
        last_turn = max(int(r["turn"]) for r in mine)
        last = [r for r in mine if int(r["turn"]) == last_turn and r["ttft_s"]]
        if last:
            worst_ttft = max(float(r["ttft_s"]) for r in last)
            rates = [float(r["decode_tokens_per_s"]) for r in last if r["decode_tokens_per_s"]]
            context = max(int(r["context_tokens"]) for r in last)
            cells[f"ttft_{suffix}"] = Cell(f"{worst_ttft:.2f} s at {context}", RAMP_TABLE, worst_ttft)
            # No rate where every chunk of the last turn's replies shared one stamp (read in one go): n/a,
            # not 0.
            cells[f"decode_{suffix}"] = (
                Cell(f"{min(rates):.1f} tok/s", RAMP_TABLE, min(rates))
                if rates
                else Cell("n/a (replies read in one go)", RAMP_TABLE)
            )
        ids = {r["request_id"] for r in mine}
        setting = [r for r in records if r.request_id in ids]
        if users == 2 and setting:
            pooled = decode_stall.pooled_stall(decode_stall.user_stalls(setting).values())
            cells["stall"] = Cell(
                decode_stall.format_stall(pooled),
                _rel(results, run.requests_path),
                pooled.factor if pooled else None,
            )
        if users == 2 and setting:
            seconds = (max(r.end_ns for r in setting) - min(r.sent_ns for r in setting)) / 1e9
            processed = sum(
                (metrics.prompt_tokens(r) or 0)
                - (metrics.cached_tokens(r) or 0)
                + ((metrics.output_tokens(r) or metrics.TokenCount(0, "usage")).tokens)
                for r in setting
            )
            cost = cost_per_million(price, gpus, seconds, processed)
            # a server that reports no cached tokens: every prompt token is counted as new, and said so
            unreported = all(metrics.cached_tokens(r) is None for r in setting)
            which = "prompt (cached not reported)" if unreported else "new prompt"
            cells["cost"] = Cell(
                f"${cost:.2f}/M tokens ({which} + output, 2-user ramp, {gpus} GPU at ${price:.2f}/h)"
                if cost is not None
                else "n/a (no GPU count)",
                _rel(results, run.requests_path),
                cost,
            )
    own = {
        key: cell
        for check in CHECKS
        if check.own_report
        for key, cell in check.cells(results, run, price).items()
    }
    facts.judgements = [check.judge(run, manifest.random_weights) for check in CHECKS if check.own_report]
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
    ramp_with_two_users: bool = False
    judgements: list[Judgement] = field(default_factory=list)  # the checks that judge their own results
    cache_findings: int = 0


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
    if "ramp" in checks and not facts.ramp_with_two_users:
        reasons.append("the conversation ramp did not run with 2 users")
    if random_weights:
        reasons.append("random weights: recall is noise")
    return ("provisional" if reasons else "validated"), tuple(reasons)


def collect(results: Path, price_per_gpu_hour: float | None = None) -> list[Row]:
    """Every run under `results/runs` that has a manifest, oldest first."""
    runs = sorted(p.parent for p in (results / "runs").glob(f"*/{MANIFEST_FILE}"))
    return [evidence_row(results, RunDir(path), price_per_gpu_hour) for path in runs]
