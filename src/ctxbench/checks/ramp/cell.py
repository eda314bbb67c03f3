"""Claim 3's evidence: its columns (recall alone and with 2 users, the last turn's TTFT and decode, the stall
under another user's prefill, the 2-user ramp's cost), their cells from the ramp's rows and records, what its
results say of the run's status (a ramp without its 2-user setting) and its recall lines at a glance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ...measure import decode_stall, metrics
from ...plan import cost_per_million
from ...records import RequestRecord
from ...render.cell import FAIL, NO_VERDICT, NOISE, PASS, UNSCORED, Cell, Glance, named_misses
from ...render.column import CLAIM_3, Column, Guide
from ...store.run_dir import RunDir
from ..base import Judgement
from ..needle import blind_tasks
from .labels import user_of
from .section import ramp_table_rows
from .table import RAMP_TABLE

CLAIM_3_COLUMNS: tuple[Column, ...] = (
    Column("recall_alone", "3 recall alone", CLAIM_3),
    Column("recall_shared", "3 recall, 2 users", CLAIM_3),
    Column(
        "ttft_alone",
        "last-turn TTFT alone",
        CLAIM_3,
        repeated=("last-turn TTFT alone, s", 2),
        guide=Guide(
            "Fastest growing conversation with complete recall",
            "at the context its ramp reached, on this node; recall {recall_alone} alone, {recall_shared} "
            "with 2 users",
            among="complete recall",
            answer="last turn {text} to the first token, decode {decode_alone}",
            missing=(
                "Fastest growing conversation with complete recall",
                "no deployment recalled the planted fact on every turn of its ramp",
                "complete recall alone and with 2 users is required before speed is compared",
            ),
        ),
    ),
    Column("ttft_shared", "last-turn TTFT, 2 users", CLAIM_3),
    Column("decode_alone", "decode alone", CLAIM_3, repeated=("last-turn decode alone, tok/s", 1)),
    Column("decode_shared", "decode, 2 users", CLAIM_3),
    Column(
        "stall",
        "decode under prefill",
        CLAIM_3,
        glance="3 decode under another user's prefill",
        repeated=("decode stall under prefill, x", 1),
        guide=Guide(
            "Decode that holds up while another user prefills",
            "pooled over its 2-user ramp; smaller is better",
            among="every row",
        ),
    ),
    Column(
        "cost",
        "cost",
        CLAIM_3,
        guide=Guide(
            "Cheapest per token in a 2-user conversation",
            "tokens the server processed (new prompt + output) over the 2-user ramp",
            missing=(
                "Cheapest per token",
                "not computed",
                "no run states its GPU count (CPU runs have no GPU cost)",
            ),
        ),
    ),
)


def ramp_cells(results: Path, run: RunDir, price: float, records: Sequence[RequestRecord]) -> dict[str, Cell]:
    """Each users setting's recall, its last turn's TTFT and decode (the slowest user's), and for 2 users
    the pooled decode stall and the cost per million processed tokens."""
    rows = ramp_table_rows(run, records)
    gpus = run.manifest().gpus
    source = str(run.requests_path.relative_to(results))
    cells: dict[str, Cell] = {}
    for users, suffix in ((1, "alone"), (2, "shared")):
        mine = [r for r in rows if r.users == str(users)]
        if not mine:
            continue
        scored = [r for r in mine if r.recall]
        k = sum(int(r.recall) for r in scored)
        cells[f"recall_{suffix}"] = Cell(f"{k}/{len(scored)}", RAMP_TABLE, scored=(k, len(scored)))
        last_turn = max(r.turn_number for r in mine)
        last = [r for r in mine if r.turn_number == last_turn and r.ttft_s]
        if last:
            worst_ttft = max(float(r.ttft_s) for r in last)
            rates = [float(r.decode_tokens_per_s) for r in last if r.decode_tokens_per_s]
            context = max(r.context for r in last)
            cells[f"ttft_{suffix}"] = Cell(f"{worst_ttft:.2f} s at {context}", RAMP_TABLE, worst_ttft)
            # No rate where every chunk of the last turn's replies shared one stamp (read in one go): n/a,
            # not 0.
            cells[f"decode_{suffix}"] = (
                Cell(f"{min(rates):.1f} tok/s", RAMP_TABLE, min(rates))
                if rates
                else Cell("n/a (replies read in one go)", RAMP_TABLE)
            )
        ids = {r.request_id for r in mine}
        setting = [r for r in records if r.request_id in ids]
        if users == 2 and setting:
            pooled = decode_stall.pooled_stall(decode_stall.user_stalls(setting, user_of).values())
            cells["stall"] = Cell(
                decode_stall.format_stall(pooled),
                source,
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
                source,
                cost,
            )
    return cells


def judgement_of(run: RunDir) -> Judgement:
    """A ramp asked for without its 2-user setting leaves claim 3's "with other users" unchecked."""
    manifest = run.manifest()
    asked = manifest.checks or ([manifest.check] if manifest.check else [])
    if "ramp" not in asked or any(r.users == "2" for r in ramp_table_rows(run)):
        return Judgement()
    return Judgement(results=("the conversation ramp did not run with 2 users",))


def glance_lines(run: RunDir, cells: Mapping[str, Cell], records: Sequence[RequestRecord]) -> list[Glance]:
    """Recall alone and with 2 users: PASS or FAIL with the turns that lost the fact named; not judged for
    random weights, and no verdict where the needle's control of the ramp's task missed (the model fails
    the task itself)."""
    manifest = run.manifest()
    task = (manifest.check_parameters.get("ramp") or {}).get("task", "single")
    judged = NOISE if manifest.random_weights else NO_VERDICT if task in blind_tasks(run) else None
    lost = _losses(run, records)
    out = []
    for users, key in (("1", "recall_alone"), ("2", "recall_shared")):
        cell = cells.get(key)
        if cell is not None and cell.source:
            misses = lost.get(users, [])
            scored = cell.scored is not None and cell.scored[1] > 0
            verdict = (judged or (FAIL if misses else PASS)) if scored else UNSCORED
            label = f"3 recall, {'alone' if users == '1' else '2 users'}"
            out.append(Glance(label, verdict, cell, named_misses(misses)))
    return out


def _losses(run: RunDir, records: Sequence[RequestRecord]) -> dict[str, list[str]]:
    lost: dict[str, list[str]] = {}
    for r in ramp_table_rows(run, records):
        if r.recall == "0":
            lost.setdefault(r.users, []).append(f"user {r.user} turn {r.turn} at {r.context_tokens} tokens")
    return lost
