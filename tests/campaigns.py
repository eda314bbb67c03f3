"""One way for a test to write a campaign file, run it and find its run: `tiny_llamacpp` (a llama.cpp
deployment of the tiny model, its table as the campaign file takes it), `write_campaign`,
`run_campaign_file` and `run_one` (a campaign of one deployment, run, its run directory returned)."""

from __future__ import annotations

from pathlib import Path

from ctxbench.campaigns.campaign import Outcome, run_campaign
from ctxbench.campaigns.campaign_file import load_campaign
from ctxbench.engines.models import TinyModel
from ctxbench.store.run_dir import RunDir


def tiny_llamacpp(
    tiny: TinyModel,
    name: str = "tiny",
    *,
    ctx_size: int = 4096,
    parallel: int = 2,
    args: str = "[]",
    extra: str = "",
) -> str:
    """A `[[deployments]]` table: llama-server on the tiny model (random weights), `args` as TOML."""
    return (
        f'\n[[deployments]]\nname = "{name}"\nengine = "llamacpp"\nmodel = "{tiny.gguf}"\n'
        f'tokenizer = "{tiny.tokenizer_dir}"\nctx_size = {ctx_size}\nparallel = {parallel}\nargs = {args}\n'
        f"random_weights = true\n{extra}"
    )


def write_campaign(tmp_path: Path, checks: str, deployments: str, name: str = "c") -> Path:
    """`<tmp_path>/<name>.toml`: the campaign `name`, its results in `<tmp_path>/results`, then the checks'
    and the deployments' tables as given."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[campaign]\nname = "{name}"\nresults = "{tmp_path / "results"}"\n{checks}\n{deployments}'
    )
    return path


def run_campaign_file(path: Path) -> list[Outcome]:
    return run_campaign(load_campaign(path))


def run_one(tmp_path: Path, checks: str, deployment: str, name: str = "c") -> RunDir:
    """A campaign of one deployment, run; its run directory (the run must have finished)."""
    path = write_campaign(tmp_path, checks, deployment, name)
    (outcome,) = run_campaign_file(path)
    assert outcome.status == "done", outcome.error
    return RunDir(load_campaign(path).campaign.results / "runs" / str(outcome.run_id))
