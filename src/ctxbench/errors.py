"""Every error ctxbench raises on purpose, in one hierarchy. Each message says what happened, where (the flag,
the file and line, the key) and what to do; the CLI prints it to stderr as `error: <message>` and exits with
the class's `exit_code` (README, Commands):

    0 done   1 a check or a command failed   2 usage: a bad flag, file or key   3 the server cannot be reached
    130 interrupted (Ctrl-C, SIGINT)   70 an internal error (a ctxbench bug: rerun with --debug, report it)
"""

from __future__ import annotations

from urllib.parse import urlsplit

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130


class CtxbenchError(Exception):
    """Base class for every error ctxbench raises on purpose."""

    exit_code = EXIT_FAILED
    # After it the process cannot finish the usual way (a library's client is stranded: Ray's, with its head
    # lost, crashed or hung in the interpreter's finalization): the CLI says it and leaves at once.
    leave_at_once = False


class UsageError(CtxbenchError):
    """A flag, file or key the user gave cannot be used; the message names it and says what to give."""

    exit_code = EXIT_USAGE


class ServerUnreachable(CtxbenchError):
    """Nothing answered at the server's URL (refused, no such host, TLS failure, reset before any answer)."""

    exit_code = EXIT_UNREACHABLE


class ContextLimitExceeded(CtxbenchError):
    """The server rejected a prompt because it is longer than its context limit."""

    def __init__(self, message: str, *, limit: int | None = None, prompt_tokens: int | None = None) -> None:
        self.limit = limit
        self.prompt_tokens = prompt_tokens
        where = f" (limit {limit} tokens" + (f", prompt {prompt_tokens} tokens)" if prompt_tokens else ")")
        super().__init__(
            f"the server rejected the prompt as over its context limit{where if limit else ''}: {message}. "
            "Send a shorter prompt or start the server with a larger context."
        )


class RequestFailed(CtxbenchError):
    """A request ended with an error other than a context-limit rejection."""


class EngineNotReady(CtxbenchError):
    """An engine did not become ready; the message carries the tail of its log, `engine_lines` its last
    few lines for the console (why it failed, in the engine's own words)."""

    engine_lines: tuple[str, ...] = ()


class EngineBuildError(CtxbenchError):
    """Building an engine from source failed; the message carries the tail of the build log."""


class ModelPrepareError(CtxbenchError):
    """A model file could not be written or converted."""


class TokenizerError(CtxbenchError):
    """A tokenizer could not be loaded or used."""


class HaystackError(CtxbenchError):
    """A haystack could not be built as asked (bad depth, empty corpus, target too small)."""


class CampaignFileError(UsageError):
    """A campaign file that cannot be used; the message names the file, line, key and fix."""


class QualityDataError(UsageError):
    """The problems file cannot be used; the message says where to get a good one."""


class PromptSourceError(UsageError):
    """The prompts file cannot be used; the message names the file, the line and what to write."""


class CheckpointError(UsageError):
    """A checkpoint file is unreadable or hostile; the message names the file and what is wrong."""


class TopologyError(CtxbenchError):
    """No GPU topology could be read."""


class TelemetryFormatError(UsageError):
    """A telemetry file this ctxbench cannot read; the message names the file and the fix."""


class CalibrationError(UsageError):
    """A run that cannot calibrate the planner; the message says what is missing."""


def check_url(url: str, where: str) -> str:
    """`url` as a server base URL (http or https, a host, no query), or a UsageError naming `where`."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"{url!r} is not a server URL ({where}): write it as http://HOST:PORT, e.g. http://127.0.0.1:8080"
        )
    try:
        bad_port = parts.port == 0
    except ValueError:
        bad_port = True
    if bad_port:
        raise UsageError(
            f"{url!r} has a bad port ({where}): write it as http://HOST:PORT with a port from 1 to 65535"
        )
    if parts.query or parts.fragment:
        raise UsageError(f"{url!r} has a query or fragment ({where}): give the server's base URL only")
    return url.strip().rstrip("/")


def validation_message(message: str) -> str:
    """A pydantic error's text as a user reads it: without the "Value error, " pydantic puts before the text a
    validator raised."""
    return message.removeprefix("Value error, ")
