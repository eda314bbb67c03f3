"""Session rules for every test run."""

from __future__ import annotations

import os

import pytest

# The categories `make test` promises (markers): a skipped test of one fails the run, unless the user names
# the category in CTXBENCH_ALLOW_SKIP (comma-separated), saying they accept the suite without it.
PROMISED = {
    "browser": "the report in a real browser (Debian's chromium: make test installs it where apt-get can)",
    "netns": "Ray across network namespaces (needs root and iproute2's `ip netns`)",
}
ALLOW_SKIP = "CTXBENCH_ALLOW_SKIP"


def _skipped_promises(reporter: pytest.TerminalReporter) -> dict[str, list[str]]:
    allowed = {name.strip() for name in os.environ.get(ALLOW_SKIP, "").split(",")}
    out: dict[str, list[str]] = {}
    for report in reporter.stats.get("skipped", []):
        for category in PROMISED.keys() - allowed:
            if category in getattr(report, "keywords", {}):
                out.setdefault(category, []).append(report.nodeid)
    return out


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    # A run that executes no test must fail, also when everything collected was skipped.
    if exitstatus == 0 and not reporter.stats.get("passed"):
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
    skipped = _skipped_promises(reporter)
    for category, nodes in skipped.items():
        reporter.write_line(
            f"error: {len(nodes)} {category} test(s) skipped ({nodes[0]} first): {PROMISED[category]}. "
            f"Make it available, or run with {ALLOW_SKIP}={category} to accept the suite without them.",
            red=True,
        )
    if skipped and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    unshown = _readme_claims_unshown(session, reporter)
    if unshown:
        reporter.write_line(
            f"error: the README names {', '.join(unshown)} as showing a capability works, and no test of "
            "them passed in this run of the whole suite",
            red=True,
        )
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _readme_claims_unshown(session: pytest.Session, reporter: pytest.TerminalReporter) -> list[str]:
    """After the whole suite (no paths or keywords given), the README-named test files none of whose tests
    passed; a file skipped by the user's leave (CTXBENCH_ALLOW_SKIP) is not counted against it."""
    config = session.config
    whole = config.args in ([], [str(config.rootpath)], ["tests"], [str(config.rootpath / "tests")])
    if not whole or config.option.keyword or config.option.markexpr:
        return []
    if not (config.rootpath / "tests" / "readme_claims.py").exists():  # another project's run of this file
        return []
    from readme_claims import named_files, works_rows

    def files(kind: str) -> set[str]:
        return {report.nodeid.split("::")[0] for report in reporter.stats.get(kind, [])}

    passed, skipped = files("passed"), files("skipped") if os.environ.get(ALLOW_SKIP) else set()
    named = {str(p.relative_to(config.rootpath)) for _, status in works_rows() for p in named_files(status)}
    return sorted(named - passed - skipped)
