"""Every check is a folder (`checks/<name>/`) and is read from there alone: its run-report section, evidence
cells and columns, console lines, glance lines, figures and status reasons come from the `Check`, and no
module outside the folder names its parts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ctxbench
from ctxbench.checks.catalog import CHECKS
from ctxbench.report.sections import CHECK_SECTIONS
from ctxbench.results.columns import EVIDENCE_COLUMNS

ROOT = Path(ctxbench.__file__).parent


def test_every_check_is_a_folder_and_has_its_section_from_it() -> None:
    for check in CHECKS:
        assert (ROOT / "checks" / check.name / "check.py").exists(), check.name
        assert type(check).__module__ == f"ctxbench.checks.{check.name}.check", check.name
    assert list(CHECK_SECTIONS) == [c.name for c in CHECKS]
    for check in CHECKS:
        assert CHECK_SECTIONS[check.name] == check.section
        assert all(column in EVIDENCE_COLUMNS for column in check.columns), check.name


# What each folder holds, as a module outside it would name it
PARTS = {
    "returning": (
        r"checks\.returning\.|returning_(cells|section|forecast)\b|Return(ing)?(File|Params|Forecast)|"
        r"RETURNING_COLUMNS"
    ),
    # its parameters model is named by `ctxbench fidelity`, whose flags are its fields (from the package)
    "fidelity": (
        r"checks\.fidelity\.|fidelity_(cells?|section)\b|Fidelity(File|Length|PathResult)|"
        r"FIDELITY_COLUMNS"
    ),
    # the cache audit reads what a trace's blocks imply (`implied_cached`, `reuse_bound`) from the package
    "trace": r"checks\.trace\.|trace_(cells|section)\b|Trace(File|Params)\b|TRACE_COLUMNS|trace_cache",
    "probe": r"checks\.probe\.",
    "capacity": r"checks\.capacity\.|capacity_(cells|section)\b|CapacityFile|CAPACITY_COLUMNS",
    "quality": (
        r"checks\.quality\.|quality_cells?\b|QualitySummary|run_summaries|QUALITY_COLUMNS|QUALITY_FILE"
    ),
    # the preflight reads a campaign's many-users prompts through the shared prompts module, not the folder
    "throughput": (
        r"checks\.throughput\.|throughput_(cells|section|comparison)\b|ThroughputFile|THROUGHPUT_COLUMNS|"
        r"closed_loop|recall_under_load|RecallUnderLoad|endpoints_(lines|points)|pareto_figure|search_lines|"
        r"open_loop_cell|slo_cell|ask_cell|many_users_figures"
    ),
    # the ramp's verdict reads which tasks failed their control, the evidence page every answer (package's)
    "needle": (
        r"checks\.needle\.|needle_(cells|section)\b|Needle(File|Trial)|TaskRecall|TaskResult|task_results|"
        r"NEEDLE_COLUMNS|CONTROL_FAILED|curve_points"
    ),
    # the command line prints where the ramp table is and plans a ramp's turns (the package's `RAMP_TABLE`,
    # `ramp_schedule`)
    "ramp": (
        r"checks\.ramp\.|ramp_(cells|section|table_rows)\b|RampFile|CLAIM_3_COLUMNS|run_rows|"
        r"record_row|append_rows|draw_timeline|timeline_figure"
    ),
    "sessions": (
        r"checks\.sessions\.|sessions_(cells|section|file|forecast)\b|session_trace|Sessions(File|Params|Forecast)|"
        r"SESSIONS_COLUMNS"
    ),
}


@pytest.mark.parametrize("name", sorted(PARTS))
def test_nothing_outside_a_checks_folder_names_its_parts(name: str) -> None:
    folder = ROOT / "checks" / name
    parts = re.compile(PARTS[name] + rf"|from \.{name}\.")
    named = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in ROOT.rglob("*.py")
        if folder not in path.parents
        for line in path.read_text().splitlines()
        if parts.search(line)
    ]
    assert named == [], named


def test_every_check_is_held_here() -> None:
    assert {c.name for c in CHECKS} == set(PARTS)


# Many users' parameters stay below the checks (config/load_params.py): the shared prompts and open loop (the
# trace replay sends through it too) and the SLO search's rule (measure/slo_search.py) take them.
SHARED_PARAMS = {"throughput": "ctxbench.config.load_params"}


def test_a_folder_holds_its_parameters_and_the_campaign_file_takes_its_table_from_the_check() -> None:
    from ctxbench.campaigns.campaign_file import Campaign
    from ctxbench.checks.catalog import Checks

    for check in CHECKS:
        home = SHARED_PARAMS.get(check.name, f"ctxbench.checks.{check.name}.params")
        assert check.params_type.__module__ == home, check.name
        assert Campaign.model_fields["checks"].annotation is Checks
        assert Checks.model_fields[check.name].annotation == check.params_type | None, check.name


def test_each_check_writes_its_requests_labels_through_its_own_model() -> None:
    """A folder's labels.py holds its `Labels` model, named for the check it belongs to: the labels a record
    of the check carries say which check sent it (tests/unit/test_labels.py holds every reader to them)."""
    import importlib
    import inspect

    from ctxbench.labels import Labels

    for check in CHECKS:
        module = importlib.import_module(f"ctxbench.checks.{check.name}.labels")
        models = [
            m
            for _, m in inspect.getmembers(module, inspect.isclass)
            if issubclass(m, Labels) and m.__module__ == module.__name__
        ]
        assert [m.model_fields["check"].default for m in models] == [check.name], check.name
