"""What a server's answer means: which streamed choice carries a token, OpenAI-style `usage` (cached
tokens included) and an error body turned into a typed `RequestError` (a context-limit rejection with the
limit and the prompt's size where the server states them, in vLLM's, SGLang's or llama.cpp's words)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..records import RequestError, Usage


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _token_id(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def logprobs_of(logprobs: object) -> list[dict[str, Any]]:
    """A streamed choice's `logprobs` (its `content` entries) as `TokenLogprob` fields. An entry without a
    numeric log-probability is left out, never an error: a malformed answer stays a record."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return []
    return [
        {
            "token": str(entry.get("token", "")),
            "id": _token_id(entry.get("id")),
            "logprob": entry["logprob"],
            "top": [
                (str(t.get("token", "")), _token_id(t.get("id")), t["logprob"])
                for t in entry.get("top_logprobs") or []
                if isinstance(t, dict) and _number(t.get("logprob"))
            ],
        }
        for entry in content
        if isinstance(entry, dict) and _number(entry.get("logprob"))
    ]


def usage_of(usage: Mapping[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cached_tokens=cached,
    )


# How each engine words an over-limit rejection; the first group is the limit.
_LIMIT_PATTERNS = (
    re.compile(r"maximum context length is (\d+)"),  # vLLM, OpenAI
    re.compile(r"context length \((\d+) tokens?\)"),  # SGLang
    re.compile(r"context size \((\d+) tokens?\)"),  # llama.cpp
)
_PROMPT_PATTERNS = (
    re.compile(r"request(?:ed)? \(?(\d+) tokens"),
    re.compile(r"input \((\d+) tokens?\)"),
    re.compile(r"has (\d+) input tokens"),
)


def not_a_stream(content_type: str, body: bytes) -> RequestError:
    """A 200 answer that is not an event stream (an HTML page from a proxy, a JSON answer that ignored
    `stream`): nothing in it can be timed, so it is a failed request naming what came."""
    text = " ".join(body.decode("utf-8", errors="replace").split())
    return RequestError(
        kind="http_status",
        message=f"HTTP 200 with Content-Type {content_type}, not text/event-stream: {text[:300]}",
    )


def http_error(status: int, body: bytes, retry_after: str | None = None) -> RequestError:
    """Classify a non-200 answer; over-limit rejections become `context_limit` with the limit. A server's
    `Retry-After` (429, 503) is kept in the message: ctxbench records it and does not retry on its own."""
    text = body.decode("utf-8", errors="replace")
    message, info = text.strip()[:2000], {}
    try:
        parsed = json.loads(text)
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else {}
        if isinstance(error, dict):
            info = error
            message = str(error.get("message", message))
        elif isinstance(error, str):
            message = error
    except json.JSONDecodeError:
        pass
    limit = info.get("n_ctx") if isinstance(info.get("n_ctx"), int) else _first_int(_LIMIT_PATTERNS, message)
    prompt = info.get("n_prompt_tokens")
    if not isinstance(prompt, int):
        prompt = _first_int(_PROMPT_PATTERNS, message)
    error_type = str(info.get("type", ""))
    is_limit = status in (400, 413, 422) and (
        "context" in error_type or limit is not None or "context length" in message.lower()
    )
    if is_limit:
        return RequestError(
            kind="context_limit", message=message, context_limit=limit, server_prompt_tokens=prompt
        )
    wait = f" (Retry-After: {retry_after})" if retry_after else ""
    return RequestError(kind="http_status", message=f"HTTP {status}: {message}{wait}")


def _first_int(patterns: Sequence[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def token_of(choice: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(text, reasoning, tool-call text) of a choice that carries a token, None for one that does not.

    A token event has a content, reasoning or tool-call field, even an empty one (vLLM sends a token that
    decodes to no visible text yet as `"content": ""`, its last token with the finish reason). Not a token:
    the role announcement without text that opens a chat stream, and llama.cpp's closing `"delta": {}`.
    llama.cpp's closing event in completions (`"text": ""` with the finish reason) looks like vLLM's last
    token; `closing_event` tells them apart by the server's own token count."""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content")
        reasoning = delta.get("reasoning_content", delta.get("reasoning"))
        tool = _tool_call_text(delta.get("tool_calls"))
        if content is None and reasoning is None and not tool:
            return None
        token = (str(content or ""), str(reasoning or ""), tool)
        return None if not any(token) and "role" in delta else token
    text = choice.get("text")
    return None if text is None else (str(text), "", "")


def closing_event(empty_finish_last: bool, events: int, completion_tokens: int | None) -> bool:
    """Whether the last token event is a closing event, not a token: it carried only the finish reason and
    the server counted one token fewer than the events (llama.cpp's completions stream ends so)."""
    return empty_finish_last and completion_tokens is not None and events == completion_tokens + 1


def _tool_call_text(calls: object) -> str:
    if not isinstance(calls, list):
        return ""
    parts = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts += [str(function.get("name") or ""), str(function.get("arguments") or "")]
    return "".join(parts) or ("(tool call)" if calls else "")


# How far the server's prompt count may stand from the planned one before the request is not the one planned:
# a few tokens of template whitespace, or 1% of a long prompt (docs/metrics.md, "Prompts as planned").
PROMPT_SLACK_TOKENS = 8
PROMPT_SLACK_FRACTION = 0.01


def unplanned_prompt(planned: int | None, usage: Usage | None) -> RequestError | None:
    """A `prompt_not_planned` error when the server counted a prompt far from the `planned` tokens (a
    request label): the server did not see the prompt ctxbench built (a chat template that drops the
    content, another tokenizer), so nothing measured on it speaks for the planned length."""
    if not planned or usage is None or usage.prompt_tokens is None:
        return None
    target = planned
    error = usage.prompt_tokens - target
    slack = max(PROMPT_SLACK_TOKENS, round(PROMPT_SLACK_FRACTION * target))
    if abs(error) <= slack:
        return None
    return RequestError(
        kind="prompt_not_planned",
        message=(
            f"server counted {usage.prompt_tokens} tokens, planned {target} ({error:+d}, beyond the "
            f"tolerance of {slack}): the server did not see the prompt ctxbench built (its chat template "
            "or tokenizer differs from the counter's)"
        ),
        server_prompt_tokens=usage.prompt_tokens,
    )
