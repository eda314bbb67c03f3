"""Read a server's configured context limit (tokens one request may hold, prompt plus output).

Read for the model served under the name requests carry: its entry in `/v1/models` (a server that lists
several models states each one's limit there; a name it does not list is an error naming those it does).
Tried in order, and the source recorded: vLLM `/v1/models` `max_model_len`; llama.cpp `/props`
`default_generation_settings.n_ctx` (per slot); SGLang `/get_model_info` (`max_context_length` or
`context_length`); llama.cpp `/v1/models` `meta.n_ctx`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from ..errors import CtxbenchError, ServerUnreachable, UsageError


@dataclass(frozen=True)
class ContextLimit:
    tokens: int
    source: str


class ContextLimitUnstated(CtxbenchError):
    """The server answered, but no endpoint stated a context limit."""


def _get(http: httpx.Client, url: str, answers: list[str]) -> Any:
    """The JSON at `url`, or None; what it answered goes into `answers` (status, type, the body's start)."""
    try:
        response = http.get(url)
    except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.ConnectTimeout) as exc:
        raise ServerUnreachable(
            f"cannot reach {url} ({type(exc).__name__}: {exc}): start the server, or fix "
            "the URL (--url, or the deployment's url in the campaign file)"
        ) from None
    except httpx.TransportError as exc:
        answers.append(f"{url}: {type(exc).__name__}")
        return None
    kind = response.headers.get("content-type", "no Content-Type")
    answers.append(f"{url}: HTTP {response.status_code} ({kind}) {' '.join(response.text.split())[:120]}")
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def served_entry(models: Any, model: str | None, where: str, fix: str) -> dict[str, Any]:
    """The `/v1/models` entry whose `id` is `model` (None: the first); {} where the server lists none. A name
    the server does not list, where it lists some, is an error naming them: another model's limit is not this
    one's."""
    listed = [m for m in models.get("data") or [] if isinstance(m, dict)] if isinstance(models, dict) else []
    if not listed:
        return {}
    if model is None:
        return listed[0]
    for entry in listed:
        if entry.get("id") == model:
            return entry
    names = ", ".join(repr(str(entry.get("id"))) for entry in listed)
    raise UsageError(f"{where} lists {names}, not {model!r}: {fix} to the model to measure")


def read_context_limit(
    base_url: str,
    timeout_s: float = 10.0,
    api_key: str | None = None,
    *,
    fix: str = "--limit",
    model: str | None = None,
    model_fix: str = "set --model",
) -> ContextLimit:
    """The per-request context limit of `model` (the name requests carry; None: the first listed), from the
    first endpoint that states one; `fix` says how to give the limit where none does, `model_fix` how to name
    a model the server lists."""
    base = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    answers: list[str] = []
    with httpx.Client(timeout=timeout_s, headers=headers) as http:
        models = _get(http, f"{base}/v1/models", answers)
        first = served_entry(models, model, f"{base}/v1/models", model_fix)
        if isinstance(first.get("max_model_len"), int):
            return ContextLimit(first["max_model_len"], f"{base}/v1/models max_model_len")
        props = _get(http, f"{base}/props", answers)
        settings = (props or {}).get("default_generation_settings", {}) if isinstance(props, dict) else {}
        if isinstance(settings.get("n_ctx"), int):
            return ContextLimit(
                settings["n_ctx"], f"{base}/props default_generation_settings.n_ctx (per slot)"
            )
        info = _get(http, f"{base}/get_model_info", answers)
        for key in ("max_context_length", "context_length", "max_total_num_tokens"):
            if isinstance(info, dict) and isinstance(info.get(key), int):
                return ContextLimit(info[key], f"{base}/get_model_info {key}")
        meta = first.get("meta", {}) if isinstance(first, dict) else {}
        if isinstance(meta.get("n_ctx"), int):
            return ContextLimit(meta["n_ctx"], f"{base}/v1/models meta.n_ctx")
    raise ContextLimitUnstated(
        f"{base} states no context limit; it answered " + "; ".join(answers) + f". Give the limit ({fix})."
    )
