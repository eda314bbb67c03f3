"""The invariants every run directory an integration test leaves must hold (DESIGN.md, "Cache intent"):
ctxbench holds its own workload to the rules it audits servers by.

- one request id is one request: no id twice in `requests.jsonl`;
- every request a check sent declared its cache intent, and none took more from the cache than it declared
  (the cache audit has no finding, by the records and by the engine's own timings);
- the engine's own counters agree with ctxbench's sums (the run report's agreement table says no "differs");
- the run report rebuilds from the files alone, byte for byte, where the suite wrote one.

A test that breaks a run on purpose (a reused seed, a rewritten record) says so with
`@pytest.mark.breaks_run_invariants("why")`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ctxbench.audits.prefix_cache import audit_run
from ctxbench.records import RECORD_VERSION
from ctxbench.report.agreement import engine_agreement
from ctxbench.report.run_report import run_report
from ctxbench.store.run_dir import RunDir


def run_dirs(root: Path) -> list[RunDir]:
    """Every run directory under `root` that this code made: it holds records of the current version (a copy
    of a recorded run, such as docs/gpu-validation's, is what it was and is judged by its own report)."""
    runs = [RunDir(path.parent) for path in sorted(root.rglob("requests.jsonl"))]
    return [run for run in runs if any(r.record_version >= RECORD_VERSION for r in run.records())]


def broken_invariants(run: RunDir) -> list[str]:
    """What the run breaks, in words (empty when it holds every invariant)."""
    broken = []
    records = list(run.records())
    twice = [i for i, n in Counter(r.request_id for r in records).items() if n > 1]
    if twice:
        broken.append(f"request ids recorded twice: {twice[:5]}")
    findings = audit_run(run).findings
    if findings:
        said = "; ".join(f"{f.request_id} {f.kind}: {f.detail}" for f in findings[:5])
        broken.append(f"cache audit: {said}")
    if (run.path / "metrics.jsonl").exists():
        differs = [a for a in engine_agreement(run, records) if a.agrees is False]
        if differs:
            broken.append(f"engine counters differ from the records: {differs[:3]}")
    report = run.path / "report.md"
    if report.exists() and (written := report.read_text()) != (rebuilt := run_report(run)):
        lines = zip(written.splitlines(), rebuilt.splitlines(), strict=False)
        first = next(
            (pair for pair in lines if pair[0] != pair[1]),
            ("(the same lines)", f"{len(written)} against {len(rebuilt)} characters"),
        )
        broken.append(
            f"{report} does not rebuild byte for byte from the run's files: written {first[0]!r}, "
            f"rebuilt {first[1]!r}"
        )
    return broken
