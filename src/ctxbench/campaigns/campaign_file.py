"""A campaign file: its model (`Campaign`, whose `[checks.*]` tables are derived from the checks and whose
deployments are config/deployments.py's) and its reading: TOML, validated, every error naming the file, the
line and the key, and (for a run) the local paths it names checked before anything starts: the model
exists, llama.cpp's is a GGUF file, the binary exists, and so does each file a check reads
(`Check.local_files`)."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from ..checks.catalog import CHECK_NAMES, Checks, selected
from ..checks.throughput import THROUGHPUT
from ..config.deployments import (
    BUILTIN_MODELS,
    ENGINE_TAGS,
    CampaignSettings,
    Comparison,
    Deployment,
    ExternalDeployment,
    LlamaCppDeployment,
    _Deployment,
)
from ..config.param_types import Strict
from ..errors import CampaignFileError, validation_message
from ..text.gguf_vocab import not_gguf


class Campaign(Strict):
    """A whole campaign file: its settings, its `[checks.*]` tables (a field for each of `CHECKS`), its
    deployments and the pairs to compare."""

    campaign: CampaignSettings
    checks: Checks = Checks()
    deployments: list[Deployment] = Field(min_length=1, max_length=256)
    compare: list[Comparison] = Field(default_factory=list, max_length=256)

    @model_validator(mode="after")
    def _names_unique_and_known(self) -> Campaign:
        names = [d.name for d in self.deployments]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"deployment name(s) {', '.join(twice)} used twice; names must be unique")
        for pair in self.compare:
            for side in (pair.a, pair.b):
                if side not in names:
                    raise ValueError(
                        f"compare names {side!r}, which is not a deployment ({', '.join(names)})"
                    )
        return self

    def checks_for(self, deployment: _Deployment) -> Checks:
        """The campaign's checks with the deployment's overrides merged in (`false` removes a check)."""
        merged: dict[str, Any] = {}
        for name in (*CHECK_NAMES, *(n for n in deployment.checks if n not in CHECK_NAMES)):
            base = getattr(self.checks, name, None)
            override = deployment.checks.get(name)  # a name no check has is refused by `Checks`
            if override is False:
                continue
            if base is None and override is None:
                continue
            merged[name] = {**(base.model_dump() if base else {}), **(override or {})}
        return Checks.model_validate(merged)

    def select(self, names: list[str]) -> list[Deployment]:
        """The deployments named (all when `names` is empty), in the file's order."""
        known = [d.name for d in self.deployments]
        for name in names:
            if name not in known:
                close = [k for k in known if name.lower() in k.lower() or k.lower() in name.lower()]
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise CampaignFileError(
                    f"--deployment {name!r} is not in the campaign ({', '.join(known)}){hint}"
                )
        return [d for d in self.deployments if not names or d.name in names]


def load_campaign(path: Path, *, check_paths: bool = True) -> Campaign:
    """Read and validate a campaign file. With `check_paths`, local model and binary paths must exist."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise CampaignFileError(f"{path}: cannot read the campaign file ({exc.strerror}).") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignFileError(f"{path}: not valid TOML: {exc}. Fix the syntax at that line.") from None
    _names_unique(path, text, data)
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        raise CampaignFileError(_describe(path, text, *_first(exc.errors()), len(exc.errors()))) from None
    for index, deployment in enumerate(campaign.deployments):
        try:
            campaign.checks_for(deployment)
        except ValidationError as exc:
            first, hint = _first(exc.errors())
            loc = ("deployments", index, "checks", *first["loc"])
            raise CampaignFileError(
                _describe(path, text, {**first, "loc": loc}, hint, len(exc.errors()))
            ) from None
        if check_paths:
            _check_local_paths(path, text, index, deployment)
    for check, params in selected(campaign.checks) if check_paths else []:
        for local in check.local_files(params):
            if (problem := local.problem()) is not None:
                where = _where(path, text, ("checks", check.name, local.key))
                raise CampaignFileError(f"{where}: {problem}. {local.instead}")
    return campaign


def require_cluster_for_actors(path: Path, campaign: Campaign, names: list[str]) -> None:
    """`ray_actors` runs a level's users on Ray actors, so a run without `--ray` refuses it before any engine
    starts, at the line that sets it."""
    for index, deployment in enumerate(campaign.deployments):
        if names and deployment.name not in names:
            continue
        throughput = campaign.checks_for(deployment).of(THROUGHPUT)
        if throughput is None or not throughput.ray_actors:
            continue
        override = deployment.checks.get(THROUGHPUT.name)
        here = isinstance(override, dict) and "ray_actors" in override
        loc = ("deployments", index, "checks", THROUGHPUT.name, "ray_actors") if here else ()
        where = _where(path, path.read_text(), loc or ("checks", THROUGHPUT.name, "ray_actors"))
        raise CampaignFileError(
            f"{where}: ray_actors = {throughput.ray_actors} (deployment {deployment.name!r}) runs the users "
            "on Ray actors, which needs a cluster: run `ctxbench run FILE --ray ADDRESS`, or set "
            "ray_actors = 0."
        )


def _check_local_paths(path: Path, text: str, index: int, deployment: _Deployment) -> None:
    model = getattr(deployment, "model", None)
    if isinstance(deployment, ExternalDeployment) or model is None or model in BUILTIN_MODELS:
        return
    if not Path(model).expanduser().exists():
        loc = ("deployments", index, "model")
        raise CampaignFileError(
            f"{_where(path, text, loc)}: model path {model!r} does not exist. Give a local file or directory "
            f"(ctxbench never downloads models), or `ctxbench:demo` / `ctxbench:tiny`."
        )
    if isinstance(deployment, LlamaCppDeployment) and (problem := not_gguf(Path(model).expanduser())):
        raise CampaignFileError(f"{_where(path, text, ('deployments', index, 'model'))}: {problem}")
    binary = getattr(deployment, "binary", None)
    if binary is not None and not Path(binary).expanduser().exists():
        loc = ("deployments", index, "binary")
        raise CampaignFileError(
            f"{_where(path, text, loc)}: binary {str(binary)!r} does not exist; leave `binary` "
            "out to use the llama-server ctxbench builds (`ctxbench engine build llamacpp`)."
        )


def _names_unique(path: Path, text: str, data: dict[str, Any]) -> None:
    """A deployment name used twice, named at the line of its second use with the line of its first."""
    seen: dict[str, int] = {}
    deployments = data.get("deployments")
    for index, entry in enumerate(deployments if isinstance(deployments, list) else []):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            first = _line_of(text, ("deployments", seen[name], "name"))
            raise CampaignFileError(
                f"{_where(path, text, ('deployments', index, 'name'))}: {name!r} is already the name of "
                f"deployments[{seen[name]}]"
                + (f" (line {first})" if first else "")
                + "; each deployment needs its own name (results and reports are filed under it)."
            )
        seen[name] = index


def _first(errors: list[ErrorDetails]) -> tuple[ErrorDetails, str]:
    """The error to show first, and a hint. An unknown key comes first: a misspelt key is both unknown and a
    required one missing (`[campaing]`), and the missing one alone would not name the typo. The hint names
    the missing key at the same place that the unknown one is closest to."""
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if not unknown:
        return errors[0], ""
    first = unknown[0]
    parent, name = tuple(first["loc"][:-1]), str(first["loc"][-1])
    missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and tuple(e["loc"][:-1]) == parent]
    close = difflib.get_close_matches(name, missing, n=1)
    return first, f"; did you mean {close[0]!r}?" if close else ""


def _describe(path: Path, text: str, error: ErrorDetails, hint: str, count: int) -> str:
    loc = tuple(error["loc"])
    # A discriminated union puts the tag in the location (`deployments.0.vllm.args`): drop it.
    loc = tuple(part for part in loc if part not in ENGINE_TAGS)
    message = validation_message(error["msg"])
    if error["type"] == "union_tag_invalid":
        message = (
            f"unknown engine {error['input'].get('engine')!r}; use one of llamacpp, vllm, sglang, external"
        )
        loc = (*loc, "engine")
    elif error["type"] == "union_tag_not_found":
        message = "every deployment needs `engine = ...` (llamacpp, vllm, sglang or external)"
    elif error["type"] == "extra_forbidden" and loc[-2:-1] == ("checks",):
        close = difflib.get_close_matches(str(loc[-1]), CHECK_NAMES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        message = f"unknown check {loc[-1]!r}; {hint}the checks are {', '.join(CHECK_NAMES)}"
    elif error["type"] == "extra_forbidden":
        message = hint.removeprefix("; ") if hint else "check its spelling against docs/campaigns.md"
        message = f"unknown key {loc[-1]!r}; {message}"
    elif error["type"] == "missing":
        message = f"required key {loc[-1]!r} is missing"
    more = f" ({count - 1} more problem(s) after this one)" if count > 1 else ""
    return f"{_where(path, text, loc)}: {message}{more}"


def _where(path: Path, text: str, loc: tuple[Any, ...]) -> str:
    key = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[")
    line = _line_of(text, loc)
    return f"{path}:{line}: {key}" if line else f"{path}: {key}"


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line that sets `loc` (best effort: tables, arrays of tables and `key =` lines, in order)."""
    lines = text.splitlines()
    start, found, table = 0, None, ""
    for position, part in enumerate(loc):
        if isinstance(part, int):
            header = re.compile(rf"^\s*\[\[\s*{re.escape(table)}\s*\]\]")
            hits = [i for i, line in enumerate(lines) if i >= start and header.match(line)]
            if part < len(hits):
                start = found = hits[part]
                start += 1
            continue
        table = f"{table}.{part}" if table and isinstance(loc[position - 1], str) else str(part)
        if position + 1 < len(loc) and isinstance(loc[position + 1], int):
            continue  # an array (of tables): the index finds the line
        # a table header naming `part` as one of its dotted components ([checks.trace] for "checks"), or a key
        name = re.escape(str(part))
        key = re.compile(rf"^\s*(\[+\s*(?:[\w\-]+\.)*{name}(?:\.[\w.\-]+)?\s*\]+|{name}\s*=)")
        for i in range(start, len(lines)):
            if key.match(lines[i]):
                found, start = i, i + 1
                break
    return None if found is None else found + 1
