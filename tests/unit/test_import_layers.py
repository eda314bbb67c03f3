"""Data flows one way (docs/architecture.md): no module imports from a later stage, function-level and
dynamic imports included, with no exception listed; a package sits in one stage, and packages import each
other one way."""

from __future__ import annotations

import ast
from pathlib import Path

import ctxbench

ROOT = Path(ctxbench.__file__).parent

# Stages, earliest first; a module may import from its own stage and earlier ones (docs/architecture.md).
# A name is a top-level module or a whole package: every module of a package is in its package's stage. The
# run directory's store comes before the checks, which write into it as they go (nothing measured is lost);
# the results that read runs back (evidence, calibration, exports) come after them, and the reports after
# the results; the suite (in campaigns) writes a run's report as the run ends. The config (what a user
# writes) comes before the client and the measures, which take its parameter types.
STAGES: list[tuple[str, ...]] = [
    ("errors", "labels", "records", "plan", "text"),
    ("config",),
    ("client", "measure"),
    ("engines", "store", "render"),
    ("checks", "audits"),
    ("results",),
    ("report",),
    ("campaigns",),  # the campaign file's `[checks.*]` tables are derived from the checks
    ("cli", "__main__", "__init__"),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


def stage_of(module: str) -> int:
    top = module.split(".")[0]  # a package's modules are all in its stage
    for index, names in enumerate(STAGES):
        if top in names:
            return index
    raise LookupError(f"{module} is in no stage of STAGES: add it (or its package) where it belongs")


def _absolute(name: str) -> str | None:
    """`ctxbench.x.y` -> `x.y`; `ctxbench` alone -> "" (the package); anything else -> None."""
    if name == "ctxbench":
        return ""
    return name.removeprefix("ctxbench.") if name.startswith("ctxbench.") else None


def _module_or_package(parts: list[str], name: str) -> str:
    """`name` imported from `parts`: the submodule `parts.name` where there is one, else `parts` itself."""
    candidate = [*parts, name]
    is_module = (
        ROOT.joinpath(*candidate).with_suffix(".py").exists()
        or ROOT.joinpath(*candidate, "__init__.py").exists()
    )
    return ".".join(candidate if is_module else parts)


def imports_of(path: Path, as_module: str | None = None) -> set[str]:
    """Every ctxbench module `path` imports, anywhere in it (functions included): relative and absolute
    imports, `from ctxbench import x`, and `importlib.import_module` or `__import__` of a literal name."""
    module = (as_module or module_name(path)).split(".")  # `as_module`: read it as if it were that module
    package = module if path.name == "__init__.py" else module[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            found.update(_module_or_package(target, alias.name) for alias in node.names)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and (inside := _absolute(node.module)) is not None
        ):
            parts = inside.split(".") if inside else []
            found.update(_module_or_package(parts, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(inside for a in node.names if (inside := _absolute(a.name)))
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                relative = name.value.startswith(".")
                inside = ".".join([*package, name.value.lstrip(".")]) if relative else _absolute(name.value)
                if inside:
                    found.add(inside)
    return {name for name in found if name}


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


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


def test_a_stage_names_whole_packages_and_each_once() -> None:
    names = [name for stage in STAGES for name in stage]
    assert all("." not in name for name in names), "a package is in one stage: name it, not its modules"
    assert len(names) == len(set(names))


def test_no_import_reaches_back_into_an_earlier_stage() -> None:
    assert back_references() == set(), "move the code or the import (docs/architecture.md): no exceptions"


def test_packages_import_each_other_one_way() -> None:
    """No cycle among packages either, within a stage included (checks and audits, engines and the store)."""
    edges: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        importer = module_name(path).split(".")[0]
        for imported in imports_of(path):
            if (top := imported.split(".")[0]) != importer:
                edges.setdefault(importer, set()).add(top)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges.get(start, ())
        )

    cycles = sorted(f"{a} <-> {b}" for a, targets in edges.items() for b in targets if reaches(b, a, {b}))
    assert cycles == []


def test_the_import_finder_sees_every_form_of_import(tmp_path: Path) -> None:
    """The rules hold only if every import is seen: these forms, each of a later stage, are all found."""
    probe = tmp_path / "probe.py"  # read as the module checks.probe_of_forms
    probe.write_text(
        "from ctxbench.campaigns import suite\n"
        "import ctxbench.report.campaign\n"
        "from .. import cli\n"
        "import importlib\n"
        "def later():\n"
        "    importlib.import_module('ctxbench.campaigns.distributed')\n"
        "    __import__('ctxbench.campaigns.demo')\n"
    )
    found = imports_of(probe, as_module="checks.probe_of_forms")
    assert found == {"campaigns.suite", "report.campaign", "cli", "campaigns.distributed", "campaigns.demo"}
    assert all(stage_of(name) > stage_of("checks") for name in found)


def test_no_module_is_over_400_lines() -> None:
    """A module holds one concept; past 400 lines it holds two (issue 19)."""
    long = {module_name(p): n for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
