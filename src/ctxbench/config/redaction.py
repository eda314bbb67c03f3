"""Secrets kept out of everything ctxbench writes or prints: an engine command's key flags and secret-looking
environment variables, shown as `<redacted>` in manifests, reports, dry runs and logs."""

from __future__ import annotations

_SECRET_FLAGS = ("--api-key", "--api-key-file", "--hf-token", "--token")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def redact_command(command: list[str]) -> list[str]:
    """An engine command with the value after any secret-bearing flag replaced (`--api-key sk-1` ->
    `--api-key <redacted>`, also `--api-key=sk-1`), so that manifests and reports never hold a key."""
    out: list[str] = []
    hide_next = False
    for arg in command:
        if hide_next:
            out.append("<redacted>")
            hide_next = False
        elif any(arg.startswith(flag + "=") for flag in _SECRET_FLAGS):
            out.append(arg.split("=", 1)[0] + "=<redacted>")
        else:
            out.append(arg)
            hide_next = arg in _SECRET_FLAGS
    return out


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Environment variables with secret-looking names (`*KEY*`, `*TOKEN*`...) shown as `<redacted>`."""
    return {k: "<redacted>" if any(w in k.upper() for w in _SECRET_WORDS) else v for k, v in env.items()}
