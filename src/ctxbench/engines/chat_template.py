"""The chat template a server renders prompts with: where it came from, its hash, and whether it is a default
the server fell back to because the model has none.

- llama.cpp: `/props` `chat_template` is the template in use. The model's own is the GGUF's
  `tokenizer.chat_template`; with neither that nor `--chat-template`/`--chat-template-file`, llama-server
  uses ChatML without a word, so ctxbench says so.
- vLLM and SGLang: `--chat-template` (a file or the text itself), else the model directory's
  `chat_template.jinja` or `tokenizer_config.json` `chat_template`; neither engine falls back to a default
  for chat requests (they refuse them), so there is no fallback to report.
- an external server: `/props` where it answers (llama.cpp), else not reported.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from .kinds import engine as engine_of

TEMPLATE_FILE = "chat_template.jinja"  # the template's text, in the run directory
TEMPLATE_FLAGS = ("--chat-template", "--chat-template-file")


def served_template(
    engine: str, base_url: str, command: Sequence[str], model: str, headers: dict[str, str]
) -> tuple[dict[str, Any], str | None]:
    """(the manifest's `chat_template` entry, the template's text or None when it cannot be known)."""
    text, source = None, None
    kind = engine_of(engine)
    if kind.template_from_props:
        text = _props_template(base_url, headers)
        source = f"{base_url}/props chat_template" if text is not None else None
    if text is None and kind.template_from_command:
        text, source = _launched_template(command, Path(model))
    if text is None:
        return {"source": None, "note": "not reported: the server does not say which template it uses"}, None
    entry: dict[str, Any] = {
        "source": source,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "file": TEMPLATE_FILE,
        "fallback": kind.template_may_fall_back and _falls_back(command, Path(model)),
    }
    return entry, text


def compare_with_counter(entry: dict[str, Any], server_text: str | None, counter_text: str | None) -> None:
    """Add to `entry` whether the counter renders with the template the server uses."""
    if counter_text is None:
        entry["counter"] = "the server renders and counts (its own template)"
    elif server_text is None:
        entry["counter"] = "the counter's template; the server's is not reported"
    else:
        entry["counter"] = "same" if server_text.strip() == counter_text.strip() else "differs"


def template_warnings(entry: dict[str, Any]) -> list[str]:
    """What a run relied on that its reader must know: a default template, or a counter rendering another."""
    warnings = []
    if entry.get("fallback"):
        warnings.append(
            "the model has no chat template and none was given: llama.cpp used its default (ChatML); "
            "give --chat-template-file with the model's real template"
        )
    if entry.get("counter") == "differs":
        warnings.append(
            "the server's chat template differs from the one ctxbench counts with: prompt counts will be "
            'off (count with the server\'s: tokenizer = "server")'
        )
    return warnings


def _props_template(base_url: str, headers: dict[str, str]) -> str | None:
    try:
        response = httpx.get(f"{base_url}/props", headers=headers, timeout=10.0)
        value = response.json().get("chat_template") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def _flag_value(command: Sequence[str], flags: Sequence[str]) -> str | None:
    for index, part in enumerate(command):
        for flag in flags:
            if part == flag and index + 1 < len(command):
                return command[index + 1]
            if part.startswith(flag + "="):
                return part.split("=", 1)[1]
    return None


def _falls_back(command: Sequence[str], model: Path) -> bool:
    """llama-server with no template flag on a GGUF that carries no template."""
    if _flag_value(command, TEMPLATE_FLAGS) is not None or model.suffix != ".gguf" or not model.exists():
        return False
    import gguf

    try:
        return "tokenizer.chat_template" not in gguf.GGUFReader(str(model)).fields
    except Exception:  # not a GGUF this library reads: cannot tell
        return False


def _launched_template(command: Sequence[str], model: Path) -> tuple[str | None, str | None]:
    given = _flag_value(command, ("--chat-template",))
    if given is not None:
        path = Path(given)
        if path.is_file():
            return path.read_text(), f"--chat-template {path}"
        return given, "--chat-template (inline)"
    if (model / "chat_template.jinja").is_file():
        return (model / "chat_template.jinja").read_text(), f"{model / 'chat_template.jinja'}"
    config = model / "tokenizer_config.json"
    if config.is_file():
        try:
            value = json.loads(config.read_text()).get("chat_template")
        except (json.JSONDecodeError, AttributeError):
            value = None
        if isinstance(value, str):
            return value, f"{config} chat_template"
    return None, None
