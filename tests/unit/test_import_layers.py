"""Data flows one way (docs/architecture.md): no module imports from a later stage, function-level imports
included. The back-references that exist today are listed by name as debts (issue 19); a new one fails, and
so does a listed one that is gone, so the list stays true."""

from __future__ import annotations

import ast
from pathlib import Path

import ctxbench

ROOT = Path(ctxbench.__file__).parent

# Stages, earliest first; a module may import from its own stage and earlier ones (docs/architecture.md).
# A name matches a module or a package (the longest match wins): the run directory's store comes before the
# checks, which write into it as they go (nothing measured is lost), while the results that read runs back
# (evidence, calibration) come after them.
STAGES: list[tuple[str, ...]] = [
    (
        "errors",
        "records",
        "answers",
        "request_json",
        "wire",
        "sse",
        "stats",
        "plan",
        "machine_cache",
        "params",
        "config",
        "campaign_file",
        "text",
    ),
    (
        "transport",
        "gc_pause",
        "event_loop",
        "client",
        "metrics",
        "steady",
        "slo_search",
        "arrivals",
        "decode_stall",
        "router",
        "chat_client",
        "telemetry",
    ),
    ("engines", "results.store", "results.ramp_table"),
    ("checks", "audits"),
    # A run's own report reads its directory back, like the evidence does; the suite writes it as a run ends.
    (
        "results",
        "report.run_report",
        "report.glance",
        "report.check_sections",
        "report.slo_section",
        "report.returning",
        "report.counters",
        "report.agreement",
        "report.tables",
        "report.timeline",
    ),
    ("suite", "preflight", "campaign", "demo", "distributed"),
    ("report",),
    ("cli", "__main__", "__init__"),
]

# Today's back-references: (importer, imported). Each is a debt to pay, not a rule. None left.
KNOWN: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def stage_of(module: str) -> int:
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        name = ".".join(parts[:length])
        for index, names in enumerate(STAGES):
            if name in names:
                return index
    raise LookupError(f"{module} is in no stage of STAGES: add it where it belongs")


def imports_of(path: Path) -> set[str]:
    """Every ctxbench module `path` imports, anywhere in it (functions included)."""
    package = (
        module_name(path).split(".") if path.name == "__init__.py" else module_name(path).split(".")[:-1]
    )
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                candidate = [*target, alias.name]
                is_module = (
                    ROOT.joinpath(*candidate).with_suffix(".py").exists()
                    or ROOT.joinpath(*candidate, "__init__.py").exists()
                )
                found.add(".".join(candidate if is_module else target))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ctxbench."):
            found.add(node.module.removeprefix("ctxbench."))
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("ctxbench.") for a in node.names if a.name.startswith("ctxbench.")
            )
    return {name for name in found if name}


def back_references() -> set[tuple[str, str]]:
    found = set()
    for path in ROOT.rglob("*.py"):
        importer = module_name(path)
        for imported in imports_of(path):
            if stage_of(imported) > stage_of(importer):
                found.add((importer, imported))
    return found


def test_every_module_has_a_stage() -> None:
    for path in ROOT.rglob("*.py"):
        stage_of(module_name(path))  # raises, naming a module the stages forgot


def test_no_new_import_reaches_back_into_an_earlier_stage() -> None:
    found = back_references()
    assert found - KNOWN == set(), "new back-references: move the code or the import (docs/architecture.md)"
    assert KNOWN - found == set(), "paid debts: remove them from KNOWN and from docs/architecture.md"


def test_no_module_is_over_400_lines() -> None:
    """A module holds one concept; past 400 lines it holds two (issue 19)."""
    long = {module_name(p): n for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
