"""The checks are one catalog (`checks.catalog.CHECKS`): each check object names its table and parameters,
counts its requests and its longest prompt; the suite and the progress bars read nothing else."""

from __future__ import annotations

import typing

from ctxbench.checks.capacity import CapacityParams
from ctxbench.checks.catalog import CHECK_NAMES, CHECKS, Checks, longest_prompt, request_count, selected
from ctxbench.checks.needle import NeedleParams
from ctxbench.checks.probe import ProbeParams, probe_request_count
from ctxbench.checks.ramp import RampParams
from ctxbench.checks.returning.params import ReturningParams
from ctxbench.config.load_params import ThroughputParams


def test_every_table_of_checks_is_one_check_object_with_its_parameters_type() -> None:
    assert sorted(check.name for check in CHECKS) == sorted(CHECK_NAMES)
    hints = typing.get_type_hints(Checks)
    for check in CHECKS:
        assert hints[check.name] == check.params_type | None, check.name


def test_checks_run_in_the_catalog_order_whatever_the_file_order() -> None:
    checks = Checks(returning=ReturningParams(), probe=ProbeParams(), ramp=RampParams())
    assert [check.name for check, _ in selected(checks)] == ["probe", "ramp", "returning"]
    assert selected(Checks()) == []


def test_request_count_is_the_sum_of_each_selected_checks_own_count() -> None:
    probe, ramp, returning = ProbeParams(), RampParams(users=[1, 2], turns=3), ReturningParams()
    checks = Checks(probe=probe, capacity=CapacityParams(), ramp=ramp, returning=returning)
    expected = probe_request_count(probe) + 2 + 3 * (1 + 2) + returning.request_count()
    assert request_count(checks) == expected


def test_longest_prompt_includes_a_needle_sized_from_the_limit_and_defaults_to_1024() -> None:
    assert longest_prompt(Checks(probe=ProbeParams()), 50_000) == 1024  # the probe uses no pool prompt
    needle = NeedleParams(lengths=[], max_tokens=32)
    assert longest_prompt(Checks(needle=needle), 50_000) == 50_000 - 32 - 16
    many = Checks(needle=NeedleParams(lengths=[2000]), throughput=ThroughputParams(prompt_tokens=3000))
    assert longest_prompt(many, 50_000) == 3000
    assert longest_prompt(Checks(capacity=CapacityParams()), 50_000) == 50_000


def test_every_check_has_one_entry_in_the_run_reports_sections() -> None:
    from ctxbench.report.sections import CHECK_SECTIONS

    assert list(CHECK_SECTIONS) == [check.name for check in CHECKS]


def test_each_check_names_the_export_stage_of_its_own_requests() -> None:
    # Issue 53: the llm-d export's stages were an if-chain over check names in results/llmd_report.py; each
    # check now says its own (Check.stage), and the export asks the catalog.
    from built_records import request

    from ctxbench.checks.catalog import CHECKS_BY_NAME
    from ctxbench.results.llmd_report import stage_of

    examples = {
        "throughput": ({"users": "4", "warmup": "0"}, "throughput-u4"),
        "needle": ({"length": "1024", "control": "1"}, "needle-1024-control"),
        "ramp": ({"users": "2", "turn": "3"}, "ramp-u2"),
        "capacity": ({"prompt": "over_limit"}, None),
        "returning": ({"phase": "return"}, "returning"),
    }
    for name, (labels, stage) in examples.items():
        assert CHECKS_BY_NAME[name].stage({"check": name, **labels}) == stage, name
        assert stage_of(request("r", 0.0, 1.0, labels={"check": name, **labels})) == stage, name
    assert CHECKS_BY_NAME["throughput"].stage({"warmup": "1"}) is None
    assert stage_of(request("r", 0.0, 1.0, labels={"check": "no-such-check"})) is None


def test_each_check_says_what_an_export_reads_of_its_requests() -> None:
    """The llm-d export asks the check, not an if-chain of names: the conversation a request belongs to, and
    the load a stage was given by design (rate or users, a shared prefix, turns, sampled prompts)."""
    from ctxbench.checks.base import StageLoad
    from ctxbench.checks.catalog import CHECKS_BY_NAME
    from ctxbench.records import RequestRecord

    def records(**labels: str) -> list[RequestRecord]:
        return [
            RequestRecord(
                request_id=f"r{n}",
                endpoint="chat",
                url="http://127.0.0.1:1",
                model="m",
                labels=labels,
                request_bytes=1,
                enqueued_ns=n * 10**9,
                sent_ns=n * 10**9,
                end_ns=n * 10**9 + 1,
            )
            for n in range(3)
        ]

    returning, sessions, ramp, throughput, trace = (
        CHECKS_BY_NAME[name] for name in ("returning", "sessions", "ramp", "throughput", "trace")
    )
    assert returning.conversation({"phase": "return", "conversation": "1"}) == "1"
    assert returning.conversation({"phase": "filler", "conversation": "1"}) is None
    assert sessions.conversation({"session": "3"}) == "3" and ramp.conversation({"user": "0"}) == "0"
    assert CHECKS_BY_NAME["needle"].conversation({"user": "0"}) is None
    assert sessions.stage_load({"system_tokens": 512, "turns": 4}, records(sessions="4")) == StageLoad(
        prefix_tokens=512, prefix_users=4, turns=4
    )
    closed = throughput.stage_load({"shared_prefix_tokens": 64, "source": "prose"}, records(users="2"))
    assert closed == StageLoad(users=2, prefix_tokens=64, prefix_users=2)
    opened = throughput.stage_load({"source": "my.jsonl"}, records(mode="open", rate="4", users="1"))
    assert opened.rate_qps == 4.0 and opened.users is None and opened.sampled
    assert ramp.stage_load({"turns": 5}, records(users="2")) == StageLoad(users=2, turns=5)
    assert trace.stage_load({}, records()).rate_qps == 1.0  # 3 arrivals a second apart
    assert returning.stage_load({}, records()) == StageLoad()  # the export states the peak in flight


def test_the_claims_and_the_fresh_checks_are_flags_on_the_checks() -> None:
    """The status rules' three claims and the audit's fresh checks (for records made before intents) are
    each check's own flags, not lists of names in evidence.py and the audit."""
    from ctxbench.audits.prefix_cache import FRESH_CHECKS

    assert [check.name for check in CHECKS if check.claim] == ["capacity", "needle", "ramp"]
    assert FRESH_CHECKS == ("capacity", "needle")
