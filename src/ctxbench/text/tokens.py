"""Token counting for the target's tokenizer, chat template included.

Three sources, in this order of preference, and the choice is recorded (`TokenCounter.source`):
1. a local Hugging Face tokenizer (`tokenizer.json`, or a model directory with `tokenizer_config.json`);
2. the vocabulary inside a GGUF file (byte-level BPE and SentencePiece: `text/gguf_vocab.py`);
3. the server's own endpoints (llama.cpp `/apply-template` + `/tokenize`; vLLM and SGLang `/tokenize`),
   chosen by name with `tokenizer = "server"` / `--tokenizer server`, and the fallback when nothing local is
   given.
Chat templates are rendered with jinja2 in a sandbox, as Hugging Face does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, Protocol

import httpx

from ..errors import ServerUnreachable, TokenizerError
from .prompt_memo import PROBE, PromptMemo, split_markers

Message = Mapping[str, str]
# Every text a counter counts on its own is counted as it stands in a haystack: after the end of a sentence.
# Its count is that of ANCHOR + text, less the anchor's own. Where a vocabulary joins a sentence's last
# stop to the blank line after it (Llama 3's and Qwen's pre-tokenizer make ".\n\n" one token), a paragraph
# counted alone was one token too many, 3% of a prompt; and a tokenizer that puts a space before a whole
# text (llama.cpp on SentencePiece) puts it before the anchor, which is taken off again.
ANCHOR = "."


class TokenCounter(Protocol):
    """Counts tokens as the target server will. `source` says where the vocabulary came from;
    `chat_template` is the template the counter renders with (None: the server renders, its own)."""

    source: str
    chat_template: str | None

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token count of each text as it stands inside a prompt after other text (the haystack adds these
        counts up), no special tokens added: no space prefix that a tokenizer puts before a whole text."""
        ...

    def count_chat(self, messages: Sequence[Message]) -> int:
        """Token count of the whole prompt the server builds from `messages` (template included)."""
        ...

    def remember(self, messages: Sequence[Message], tokens: int) -> None:
        """`messages` make a prompt of `tokens` (a haystack's plan): a later prompt that continues them (the
        conversation's next turn) is counted from where it parts from them (`text/prompt_memo.py`)."""
        ...

    def close(self) -> None:
        """Release what the counter holds (the server counter's HTTP connections)."""
        ...


def render_template(template: str, messages: Sequence[Message], special: Mapping[str, str]) -> str:
    return _compiled(template).render(messages=list(messages), add_generation_prompt=True, **special)


@functools.lru_cache(maxsize=16)
def _compiled(template: str) -> Any:
    """A chat template compiled once: compiling it on every count took more time than rendering it
    (the many-users check counts every prompt it builds)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TokenizerError(f"the chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


class TemplatedCounter:
    """A local counter that renders the chat template itself (a Hugging Face tokenizer, a GGUF's
    SentencePiece vocabulary): chat counts through the prompt memo; subclasses count a rendered prompt."""

    source: str
    chat_template: str | None
    _special: dict[str, str]
    _leading_bos: str | None  # the BOS text a server puts before every chat prompt (add_bos_token)
    _memo: PromptMemo

    def count_rendered(self, prompt: str) -> int:
        raise NotImplementedError

    def count_chat(self, messages: Sequence[Message]) -> int:
        bos, prompt = self.rendered(messages)
        return bos + self._memo.count(prompt, self.count_rendered)

    def remember(self, messages: Sequence[Message], tokens: int) -> None:
        bos, prompt = self.rendered(messages)
        self._memo.remember(prompt, tokens - bos)

    def rendered(self, messages: Sequence[Message]) -> tuple[int, str]:
        """(BOS tokens the server adds, the prompt as the template renders it, without that BOS)."""
        if not self.chat_template:
            raise TokenizerError(
                f"{self.source} has no chat template; count with the server's tokenizer instead "
                '(tokenizer = "server", or --tokenizer server).'
            )
        prompt = render_template(self.chat_template, messages, self._special)
        if self._leading_bos is not None:
            return 1, prompt.removeprefix(self._leading_bos)
        return 0, prompt


class HfTokenCounter(TemplatedCounter):
    """A `tokenizers.Tokenizer` plus a jinja chat template (from `tokenizer_config.json` or given)."""

    def __init__(
        self,
        tokenizer: Any,
        chat_template: str | None,
        special: Mapping[str, str],
        source: str,
        leading_bos: str | None = None,
    ) -> None:
        """`leading_bos`: the BOS text a server puts before every chat prompt (a GGUF's `add_bos_token`);
        a chat count then has one BOS, whether or not the template wrote it."""
        self._tokenizer = tokenizer
        self.chat_template = chat_template
        self._special = dict(special)
        self._leading_bos = leading_bos
        self.source = source
        self._anchor = len(tokenizer.encode(ANCHOR, add_special_tokens=False).ids)
        specials = [t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special]
        self._memo = memo_for(self, specials)

    @classmethod
    def from_path(cls, path: Path) -> HfTokenCounter:
        """`path` is a `tokenizer.json` or a directory holding one (and maybe `tokenizer_config.json`)."""
        from tokenizers import Tokenizer

        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.exists():
            raise TokenizerError(f"no tokenizer.json at {path}; give a tokenizer.json or a model directory.")
        try:
            tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # tokenizers raises plain Exception on a bad file
            raise TokenizerError(f"cannot read the tokenizer {file}: {exc}") from exc
        config_path = file.with_name("tokenizer_config.json")
        template, special = None, {}
        if config_path.exists():
            try:
                config = json.loads(config_path.read_text())
            except json.JSONDecodeError as exc:
                raise TokenizerError(
                    f"{config_path} is not valid JSON (line {exc.lineno}): {exc.msg}"
                ) from exc
            template = config.get("chat_template")
            special = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token") if config.get(k)}
        return cls(tokenizer, template, special, f"hf:{file}")

    def close(self) -> None:
        pass

    def count_many(self, texts: Sequence[str]) -> list[int]:
        encodings = self._tokenizer.encode_batch([ANCHOR + t for t in texts], add_special_tokens=False)
        return [len(e.ids) - self._anchor for e in encodings]

    def count_rendered(self, prompt: str) -> int:
        """A rendered prompt's tokens, special tokens matched."""
        # encode_batch, not encode: it lets go of the GIL while it counts, so a ramp turn whose 1M-token
        # history is counted in a worker thread no longer stops the event loop (2.6 s at 1M with encode).
        return len(self._tokenizer.encode_batch([prompt], add_special_tokens=False)[0].ids)


def memo_for(counter: TemplatedCounter, specials: Sequence[str]) -> PromptMemo:
    """The counter's memo of planned prompts, split at the special tokens its template writes (none: a
    template that cannot render the probe, or no special token to split at, and every prompt counts whole)."""
    if not counter.chat_template:
        return PromptMemo(())
    try:
        _, probe = counter.rendered(PROBE)
    except TokenizerError:
        return PromptMemo(())
    return PromptMemo(split_markers(probe, specials, counter.count_rendered))


def _token_text(value: object) -> str:
    return str(value.get("content", "")) if isinstance(value, dict) else str(value)


class ServerTokenCounter:
    """Counts with the server's own endpoints; one HTTP call per text.

    A text is counted after `ANCHOR`, less the anchor's own count, as every counter counts."""

    def __init__(self, base_url: str, model: str, timeout_s: float = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.source = f"server:{self.base_url}"
        self.chat_template: str | None = None
        self._http = httpx.Client(timeout=timeout_s)
        self._llamacpp = self._post("/apply-template", {"messages": []}).status_code != 404
        self._anchor_tokens = len(self._tokenize(ANCHOR))

    def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        try:
            return self._http.post(self.base_url + path, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
            raise ServerUnreachable(
                f"cannot reach {self.base_url} ({type(exc).__name__}: {exc}) to count tokens with the "
                "server's tokenizer: start the server or fix --url, or count locally with --tokenizer or "
                "--gguf"
            ) from None
        except httpx.TransportError as exc:  # it answered, then broke off or went silent past the timeout
            raise TokenizerError(
                f"{self.base_url}{path}: {type(exc).__name__}: {exc}; count locally with "
                "--tokenizer or --gguf, or retry when the server is less busy"
            ) from None

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(self._tokenize(ANCHOR + text)) - self._anchor_tokens for text in texts]

    def _answer(self, path: str, body: dict[str, Any], key: str) -> Any:
        """`key` of the JSON the server answered at `path`; any other answer (a status, a page, JSON without
        it) is a `TokenizerError` naming what came and what to do."""
        response = self._post(path, body)
        value = _json_key(response, key) if response.status_code == 200 else None
        if value is None:
            raise TokenizerError(
                f"{self.base_url}{path} answered HTTP {response.status_code} "
                f"({response.headers.get('content-type', 'no Content-Type')}): "
                f"{' '.join(response.text.split())[:300]}; this server does not count tokens as llama.cpp, "
                "vLLM or SGLang do: count locally with --tokenizer or --gguf (a campaign file's `tokenizer`: "
                "a tokenizer directory, a tokenizer.json or a .gguf)"
            )
        return value

    def _tokenize(self, text: str) -> list[int]:
        body: dict[str, Any] = {"content": text, "add_special": False}
        if not self._llamacpp:
            body = {"model": self.model, "prompt": text, "add_special_tokens": False}
        return list(self._answer("/tokenize", body, "tokens"))

    def count_chat(self, messages: Sequence[Message]) -> int:
        if self._llamacpp:
            prompt = self._answer("/apply-template", {"messages": list(messages)}, "prompt")
            return len(self._answer("/tokenize", {"content": prompt, "add_special": True}, "tokens"))
        return int(self._answer("/tokenize", {"model": self.model, "messages": list(messages)}, "count"))

    def remember(self, messages: Sequence[Message], tokens: int) -> None:
        pass  # the server counts every prompt whole

    def close(self) -> None:
        self._http.close()


def _json_key(response: httpx.Response, key: str) -> Any:
    try:
        return response.json()[key]
    except (ValueError, KeyError, TypeError):
        return None


SERVER = "server"  # `tokenizer = "server"` / `--tokenizer server`: count with the server's own tokenizer


def load_token_counter(
    tokenizer: Path | str | None, gguf: Path | None, server_url: str | None, model: str
) -> TokenCounter:
    """The first available of: a local HF tokenizer, a GGUF's vocabulary, the server's tokenizer.
    `tokenizer` "server" (a directory of that name is `./server`) chooses the server's tokenizer."""
    if tokenizer is not None and str(tokenizer) == SERVER:
        if server_url is None:
            raise TokenizerError(
                'tokenizer "server" counts with the server\'s /tokenize, and there is no server URL here; '
                "give --url, or a local tokenizer (--tokenizer PATH or --gguf FILE)"
            )
        return ServerTokenCounter(server_url, model)
    if tokenizer is not None:
        return HfTokenCounter.from_path(Path(tokenizer))
    if gguf is not None:
        from .gguf_vocab import gguf_token_counter

        return gguf_token_counter(gguf)
    if server_url is not None:
        return ServerTokenCounter(server_url, model)
    raise TokenizerError(
        "no tokenizer: give --tokenizer (HF file or directory, or 'server'), --gguf, or a server URL."
    )


class NotCounting:
    """The counter of a run whose checks count no tokens (the probe alone): nothing was loaded or asked of
    the server, and a count asked of it is a ctxbench bug, said as one."""

    source = "none: no check of this run counts tokens"
    chat_template: str | None = None

    def _refuse(self) -> NoReturn:
        raise TokenizerError("a check counted tokens in a run whose checks declared they count none")

    def count_many(self, texts: Sequence[str]) -> list[int]:
        self._refuse()

    def count_chat(self, messages: Sequence[Message]) -> int:
        self._refuse()

    def remember(self, messages: Sequence[Message], tokens: int) -> None:
        pass

    def close(self) -> None:
        pass


def require_content_counted(counter: TokenCounter) -> None:
    """Refuse a counter whose chat count does not grow with the message: its chat template (the server's,
    when the server counts) drops the content, and every prompt would reach the model as a few tokens."""
    short = counter.count_chat([{"role": "user", "content": "Lisbon."}])
    long = counter.count_chat([{"role": "user", "content": "Lisbon is a harbour city. " * 32}])
    if long <= short:
        raise TokenizerError(
            f"{counter.source}: a chat prompt of one word counts {short} tokens and one of 32 sentences "
            f"{long}: the chat template drops the message content. Give a template that writes "
            "{{ message['content'] }} (llama.cpp: --chat-template takes a built-in name such as chatml, "
            "--chat-template-file a file), or a model whose own template does."
        )
