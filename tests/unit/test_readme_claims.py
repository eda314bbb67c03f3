"""Every "works" in the README's capability table names the tests that show it (issue 57), and each named
file exists and holds tests; the whole suite then checks each had a test pass (tests/conftest.py)."""

from __future__ import annotations

from readme_claims import README, named_files, works_rows


def test_every_works_row_names_existing_test_files() -> None:
    rows = works_rows()
    assert len(rows) >= 30, rows
    unnamed = [capability[:80] for capability, status in rows if not named_files(status)]
    assert unnamed == [], unnamed
    for capability, status in rows:
        for path in named_files(status):
            assert path.exists(), (capability[:60], path)
            assert "\ndef test_" in path.read_text() or "\nasync def test_" in path.read_text(), path


def test_the_readme_says_how_many_requests_the_demo_plans() -> None:
    # Issue 57: the README said the demo sends 61 requests while it planned and sent far more.
    from importlib import resources

    from ctxbench.campaigns.campaign_file import load_campaign
    from ctxbench.checks.catalog import request_count

    with resources.as_file(resources.files("ctxbench.campaigns").joinpath("demo.toml")) as path:
        campaign = load_campaign(path, check_paths=False)
    (deployment,) = campaign.deployments
    planned = request_count(campaign.checks_for(deployment))
    assert f"of the {planned} the progress bar counts" in README.read_text(), planned
