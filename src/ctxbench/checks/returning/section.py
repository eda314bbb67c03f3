"""The run report's returning-users section: each conversation's return beside its immediate return and a
fresh prefill, and the planner's forecast beside the measurement."""

from __future__ import annotations

from ...engines.kinds import find_engine
from ...engines.llamacpp import KV_BYTES_PER_VALUE, cache_settings
from ...errors import CalibrationError
from ...render.run_read import RunRead
from ...render.tables import fmt, markdown_table, recorded_text, relative
from ...store.run_dir import RunDir
from ...store.run_files import Manifest
from .file import ReturningFile
from .forecast import ReturnForecast, returning_forecast


def forecast_of(manifest: Manifest, data: ReturningFile) -> ReturnForecast | None:
    """The planner's forecast for this run, where the engine's cache model is known (llama.cpp: slots and
    `--cache-ram` from its command, KV bytes a token from the model's shape); None otherwise."""
    kind = find_engine(manifest.engine.kind)
    if kind is None or not kind.cache_model_known or not manifest.engine.command:
        return None
    try:
        shape = manifest.dense_shape()
    except CalibrationError:  # no shape (not a GGUF, or an older manifest): no forecast
        return None
    slots, host_bytes = cache_settings(list(manifest.engine.command))
    spec = data.spec
    tokens = max((c.history_tokens for c in data.conversations), default=spec["context"])
    return returning_forecast(
        conversations=spec["conversations"],
        conversation_tokens=tokens,
        filler_requests=spec["filler_requests"],
        filler_tokens=spec["filler_tokens"] or spec["context"],
        slots=slots,
        host_cache_bytes=host_bytes,
        kv_bytes_per_token=shape.kv_bytes_per_token(KV_BYTES_PER_VALUE),
    )


def returning_section(read: RunRead) -> list[str]:
    run = read.run
    data = ReturningFile.load(run.path)
    if data is None:
        return []
    path = ReturningFile.path_in(run.path)
    manifest = run.manifest()
    spec = data.spec
    rows = [
        [
            str(c.conversation),
            str(c.history_tokens),
            "n/a" if c.cached_on_return is None else str(c.cached_on_return),
            fmt(c.ttft_immediate_s),
            fmt(c.ttft_return_s),
            fmt(c.ttft_fresh_s),
            c.verdict,
        ]
        for c in data.conversations
    ]
    columns = ["conversation", "history tok", "cached on return", "TTFT immediate s", "TTFT return s"]
    columns += ["TTFT fresh s", "verdict"]
    forecast = forecast_of(manifest, data)
    verdicts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(data.verdicts.items()))
    if forecast is None:
        predicted = "no forecast: the planner models llama.cpp's slots and host prompt cache only"
    else:
        capacity = (
            "no limit" if forecast.host_cache_tokens is None else f"{forecast.host_cache_tokens:.0f} tokens"
        )
        predicted = (
            f"forecast (checks.returning.forecast): {forecast.in_slots} still in a slot, "
            f"{forecast.from_host_cache} restored from the host prompt cache ({capacity}; "
            f"{forecast.pushed_tokens} tokens pushed out before the first return), {forecast.recomputed} "
            "recomputed"
        )
        slots, _ = cache_settings(list(manifest.engine.command or []))
        tokens = max((c.history_tokens for c in data.conversations), default=spec["context"])
        beyond = (
            "never (no limit)"
            if forecast.host_cache_tokens is None
            else f"beyond {forecast.host_cache_tokens / tokens:.0f} conversations of {tokens} tokens"
        )
        predicted += (
            f". Eviction begins: from the slots once {slots} other prompts pass between a conversation's "
            f"turns; from the host cache {beyond}"
        )
    talks = data.conversations
    return [
        "",
        "## Returning users",
        "",
        f"{spec['conversations']} conversations of {spec['context']} tokens, each asked again at once; "
        f"then {spec['filler_requests']} fresh prompts of {spec['filler_tokens'] or spec['context']} tokens "
        "from other users; then each conversation returns with one more question, and a fresh prompt of the "
        "same length is prefilled beside it. Cached: at least 90% of the history reported cached on return.",
        f"- Measured: {verdicts}; TTFT median (95% interval over the conversations) immediate "
        f"{recorded_text(data.ttft_immediate_s, 0.5, None, [c.ttft_immediate_s for c in talks])} s, on "
        f"return {recorded_text(data.ttft_return_s, 0.5, None, [c.ttft_return_s for c in talks])} s, "
        f"fresh {recorded_text(data.ttft_fresh_s, 0.5, None, [c.ttft_fresh_s for c in talks])} s.",
        f"- {predicted[0].upper()}{predicted[1:]}.",
        "",
        markdown_table(rows, columns),
        f"\nSource: `{relative(path)}` and `{relative(run.requests_path)}` (`labels.check = returning`).",
    ]


def console_lines(run: RunDir) -> list[str]:
    """Its line of the console summary: the verdicts, and TTFT on return against fresh."""
    data = ReturningFile.load(run.path)
    if data is None:
        return []
    verdicts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(data.verdicts.items()))
    return [
        f"returning users: {verdicts}; TTFT on return {fmt(data.ttft_return_s)} s, fresh "
        f"{fmt(data.ttft_fresh_s)} s"
    ]
