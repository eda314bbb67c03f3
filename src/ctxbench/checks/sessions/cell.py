"""The agent sessions' evidence cell and the planner's forecast beside it: how many sessions of what context
the cache held through their gaps, where it gave up, and where `forecast.sessions_forecast` said it would."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...engines.kinds import find_engine
from ...engines.llamacpp import KV_BYTES_PER_VALUE, cache_settings
from ...errors import CalibrationError
from ...render.cell import Cell
from ...render.column import TRAFFIC, Column, Guide
from ...store.counters import engine_hits
from ...store.run_dir import RunDir
from .file import SessionsFile
from .forecast import SessionsForecast, pool_sessions_forecast, sessions_forecast

SESSIONS_COLUMNS: tuple[Column, ...] = (
    Column(
        "sessions",
        "agent sessions",
        TRAFFIC,
        glance="agent sessions",
        guide=Guide(
            "Keeps the most concurrent agent sessions' context through their idle gaps",
            "at the system prompt, turn sizes and gaps of its `[checks.sessions]`; longer sessions or gaps "
            "under more traffic need more cache (host RAM, offload); the planner's forecast stands beside it",
            lower_is_better=False,
        ),
    ),
)


def session_tokens(data: SessionsFile) -> int:
    """The context one session held at its longest, as the server counted it (prompt and reply)."""
    longest = max((t.prompt_tokens or 0 for t in data.turns), default=0)
    return longest + int(data.spec["max_tokens"])


def returning_tokens(data: SessionsFile) -> int:
    """The most context a returning turn needed found: its previous prompt and reply, as the server counted
    them."""
    return max((t.reusable_tokens or 0 for t in data.turns), default=0)


def forecast_of(run: RunDir, data: SessionsFile) -> SessionsForecast | None:
    """The planner's forecast for this run where the engine's cache model is known: llama.cpp's slots and
    `--cache-ram` from its command with KV bytes a token from the model's shape; vLLM's block pool from the KV
    cache size its own log states. None otherwise."""
    manifest = run.manifest()
    kind = find_engine(manifest.engine.kind, manifest.engine.name)
    if kind is not None and kind.name == "vllm":
        stated = vllm_kv_tokens(run.path / "server.log")
        if stated is None:
            return None
        return pool_sessions_forecast(
            session_tokens=session_tokens(data), kv_tokens=stated, source="vLLM's log"
        )
    if kind is None or not kind.cache_model_known or not manifest.engine.command:
        return None
    try:
        shape = manifest.dense_shape()
    except CalibrationError:
        return None
    slots, host_bytes = cache_settings(list(manifest.engine.command))
    return sessions_forecast(
        session_tokens=returning_tokens(data) or session_tokens(data),
        slots=slots,
        host_cache_bytes=host_bytes,
        kv_bytes_per_token=shape.kv_bytes_per_token(KV_BYTES_PER_VALUE),
    )


VLLM_KV_LINE = re.compile(r"KV cache size: ([\d,]+) tokens")  # vllm/v1/core/kv_cache_utils.py, 0.32


def vllm_kv_tokens(log: Path) -> int | None:
    """The KV cache size in tokens that vLLM's log states as it starts (one replica: `server.log`)."""
    try:
        found = VLLM_KV_LINE.search(log.read_text(errors="replace"))
    except OSError:
        return None
    return int(found.group(1).replace(",", "")) if found else None


def gaps_words(spec: dict[str, Any]) -> str:
    scale = float(spec["time_scale"])
    gap = float(spec["gap_s"]) * scale
    scaled = f", time scale x{scale:g}" if scale != 1 else ""
    return f"{spec['gap']} {gap:g} s gaps{scaled}"


def traced_gaps_words(data: SessionsFile) -> str:
    """A replayed trace's gaps as they were sent: "the trace's gaps (1.0-4.2 s)" (its timing, where no turn
    returned)."""
    gaps = [t.gap_s for t in data.turns if t.gap_s is not None]
    return f"the trace's gaps ({min(gaps):.1f}-{max(gaps):.1f} s)" if gaps else "the trace's timing"


def forecast_words(forecast: SessionsForecast | None) -> str:
    if forecast is None:
        return "no forecast: the planner models llama.cpp's slots and host prompt cache, and vLLM's KV pool"
    held = "every level" if forecast.held is None else str(forecast.held)
    return f"forecast: {held} ({forecast.basis})"


def summary_words(data: SessionsFile) -> str:
    """'holds 8 sessions of 65536 tokens with fixed 30 s gaps; at 16 sessions returning turns find 12% of
    their context cached'."""
    tokens = session_tokens(data)
    gaps = gaps_words(data.spec) if not data.spec.get("trace") else traced_gaps_words(data)
    cliff = next((level for level in data.levels if level.sessions == data.cliff), None)
    held = (
        f"holds {data.held} session{'s' * (data.held != 1)} of {tokens} tokens with {gaps}"
        if data.held
        else f"holds no level run, sessions of {tokens} tokens with {gaps}"
    )
    if cliff is not None and cliff.hit_ratio is not None:
        found = f"returning turns find {cliff.hit_ratio:.0%} of their context cached"
        return f"{held}; at {cliff.sessions} sessions {found}"
    return f"{held}; every level run held (up to {max(level.sessions for level in data.levels)})"


def sessions_cells(results: Path, run: RunDir) -> dict[str, Cell]:
    """The sessions held and the cliff, the forecast beside them. Where the server reported no cached tokens
    the cell says so (with the engine's counter over the check) and has no value, so no reading ranks it."""
    data = SessionsFile.load(run.path)
    if data is None or not data.levels:
        return {}
    source = str(SessionsFile.path_in(run.path).relative_to(results))
    if all(level.hit_ratio is None for level in data.levels):
        text = f"cached tokens not reported{engine_hits(run, 'sessions')}"
        return {"sessions": Cell(text, source)}
    forecast = forecast_words(forecast_of(run, data))
    return {"sessions": Cell(f"{summary_words(data)} ({forecast})", source, float(data.held or 0))}


def console_lines(run: RunDir) -> list[str]:
    """Its line of the console summary: what held, and the planner's forecast."""
    data = SessionsFile.load(run.path)
    if data is None or not data.levels:
        return []
    return [f"agent sessions: {summary_words(data)}; {forecast_words(forecast_of(run, data))}"]
