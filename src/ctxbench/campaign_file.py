"""Reading a campaign file: TOML, validated against config.py's models, every error naming the file, the
line and the key, and (for a run) the local paths it names checked before anything starts: the model
exists, llama.cpp's is a GGUF file, the binary, the quality data and the trace file exist."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .config import BUILTIN_MODELS, ENGINE_TAGS, Campaign, ExternalDeployment, LlamaCppDeployment, _Deployment
from .errors import CampaignFileError, validation_message
from .text.gguf_vocab import not_gguf


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
    quality = campaign.checks.quality
    if check_paths and quality is not None and not quality.data.expanduser().exists():
        raise CampaignFileError(
            f"{_where(path, text, ('checks', 'quality', 'data'))}: {str(quality.data)!r} does not exist. Get "
            "GSM8K's test.jsonl from https://github.com/openai/grade-school-math or the Hugging Face dataset "
            "openai/gsm8k and give its local path (ctxbench never downloads data)."
        )
    trace = campaign.checks.trace
    if check_paths and trace is not None and not trace.file.expanduser().is_file():
        raise CampaignFileError(
            f"{_where(path, text, ('checks', 'trace', 'file'))}: {str(trace.file)!r} is not a file. Give the "
            "local path of a Mooncake-format JSONL trace (examples/mooncake-sample.jsonl is one)."
        )
    sessions = campaign.checks.sessions
    if (
        check_paths
        and sessions is not None
        and sessions.trace is not None
        and not sessions.trace.expanduser().is_file()
    ):
        raise CampaignFileError(
            f"{_where(path, text, ('checks', 'sessions', 'trace'))}: {str(sessions.trace)!r} is not a file. "
            'Give the local path of recorded sessions (docs/campaigns.md, "Session traces"), or leave trace '
            "out to run the levels of `sessions`."
        )
    return campaign


def require_cluster_for_actors(path: Path, campaign: Campaign, names: list[str]) -> None:
    """`ray_actors` runs a level's users on Ray actors, so a run without `--ray` refuses it before any engine
    starts, at the line that sets it."""
    for index, deployment in enumerate(campaign.deployments):
        if names and deployment.name not in names:
            continue
        throughput = campaign.checks_for(deployment).throughput
        if throughput is None or not throughput.ray_actors:
            continue
        override = deployment.checks.get("throughput")
        here = isinstance(override, dict) and "ray_actors" in override
        loc = ("deployments", index, "checks", "throughput", "ray_actors") if here else ()
        where = _where(path, path.read_text(), loc or ("checks", "throughput", "ray_actors"))
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
