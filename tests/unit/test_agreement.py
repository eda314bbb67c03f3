"""The agreement with the engine's own counters at 1M-token sizes: llama.cpp prints `/metrics` values to 6
significant digits, so a count above 10^6 agrees within that rounding (and with the engine's exact per-request
timings), while a real difference, or one the timings contradict, is still flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbench.engines.prom import common_metrics, printed_digits, rounding_error
from ctxbench.records import RequestRecord, Usage
from ctxbench.report.agreement import agreement_section, engine_agreement
from ctxbench.store.run_dir import RunDir


def printed(value: float) -> float:
    """The value as llama-server writes it (a C++ stream's default precision) and Python reads it back."""
    return float(f"{value:.6g}")


def llamacpp(prompt: float, cached: float, generated: float) -> dict[str, float]:
    return {
        "llamacpp:prompt_tokens_total": printed(prompt),
        "llamacpp:prompt_tokens_cached_total": printed(cached),
        "llamacpp:tokens_predicted_total": printed(generated),
    }


def record(request_id: str, prompt_n: int, cache_n: int, predicted_n: int, **usage: int) -> RequestRecord:
    counts = {"prompt_tokens": prompt_n + cache_n, "completion_tokens": predicted_n, "cached_tokens": cache_n}
    return RequestRecord(
        request_id=request_id,
        endpoint="chat",
        url="http://127.0.0.1:1/v1/chat/completions",
        model="m",
        labels={"check": "capacity"},
        request_bytes=1,
        enqueued_ns=0,
        sent_ns=0,
        end_ns=1,
        http_status=200,
        usage=Usage(**(counts | usage)),
        server_timings={"prompt_n": prompt_n, "cache_n": cache_n, "predicted_n": predicted_n},
    )


def run_with(
    tmp_path: Path, before: dict[str, float], after: dict[str, float], *records: RequestRecord
) -> RunDir:
    run = RunDir.create(tmp_path, "agreement")
    run.append_metrics("capacity", "before", [before], common_metrics)
    run.append_metrics("capacity", "after", [after], common_metrics)
    for one in records:
        run.append(one)
    return run


def test_llamacpp_rounding_is_half_a_unit_of_its_sixth_digit() -> None:
    assert printed_digits(llamacpp(1, 2, 3)) == 6
    assert printed_digits({"vllm:prompt_tokens_total": 1049561.0}) is None
    assert rounding_error(999_999, 6) == 0  # six digits: printed in full
    assert rounding_error(1_049_560, 6) == 5  # 1.04956e+06: the units digit is lost
    assert rounding_error(12_345_700, 6) == 50
    assert rounding_error(1_049_561, None) == 0


def test_a_million_token_count_agrees_within_the_engines_rounding(tmp_path: Path) -> None:
    # Seen at 1M on an H100: capacity's computed prompt tokens read 1,049,561 / 1,049,564 "differs".
    run = run_with(
        tmp_path,
        llamacpp(3, 0, 0),
        llamacpp(3 + 1_049_564, 27, 1),
        record("capacity-1", 1_049_564, 27, 1),
    )
    found = {a.name: a for a in engine_agreement(run)}
    computed = found["prompt_tokens_computed"]
    assert computed.engine == 1_049_567 and computed.rounding == 5 and computed.exact == 1_049_564
    assert computed.agrees and computed.within_rounding
    assert found["cached_tokens"].agrees and not found["cached_tokens"].within_rounding
    text = "\n".join(agreement_section(run, list(run.records())))
    assert "1049567 / 1049564 (agrees: the engine rounds)" in text and "differs" not in text
    assert "agree within the engine's rounding" in text


def test_a_difference_beyond_the_rounding_or_against_the_timings_still_differs(tmp_path: Path) -> None:
    beyond = run_with(
        tmp_path / "beyond", llamacpp(0, 0, 0), llamacpp(1_049_600, 0, 1), record("c-1", 1_049_564, 0, 1)
    )
    computed = {a.name: a for a in engine_agreement(beyond)}["prompt_tokens_computed"]
    assert computed.rounding == 5 and computed.agrees is False
    assert "**differs**" in "\n".join(agreement_section(beyond, list(beyond.records())))
    # Inside the rounding, but the server's own per-request timings say 3 tokens fewer than its usage.
    against = run_with(
        tmp_path / "against",
        llamacpp(0, 0, 0),
        llamacpp(1_049_564, 0, 1),
        record("c-1", 1_049_561, 0, 1, prompt_tokens=1_049_564),
    )
    computed = {a.name: a for a in engine_agreement(against)}["prompt_tokens_computed"]
    assert computed.exact == 1_049_561 and computed.agrees is False


@pytest.mark.parametrize("off_by", [0, 1])
def test_an_engine_that_prints_exactly_gets_no_rounding(tmp_path: Path, off_by: int) -> None:
    samples = {"vllm:prompt_tokens_total": 1_049_564.0 + off_by, "vllm:prompt_tokens_cached_total": 0.0}
    run = run_with(
        tmp_path,
        {"vllm:prompt_tokens_total": 0.0, "vllm:prompt_tokens_cached_total": 0.0},
        samples,
        record("c-1", 1_049_564, 0, 1).model_copy(update={"server_timings": None}),
    )
    found = {a.name: a for a in engine_agreement(run)}["prompt_tokens_all"]
    assert found.rounding == 0 and found.exact is None and found.agrees is (off_by == 0)


def test_a_share_gauge_is_averaged_over_engines_and_a_counter_summed() -> None:
    # Issue 69: vLLM with two data-parallel engines labels each one's KV usage; two engines a quarter full
    # read as half full when summed like counters.
    text = (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25\n'
        "# TYPE vllm:prompt_tokens counter\n"
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 100\n'
        'vllm:prompt_tokens_total{engine="1",model_name="m"} 50\n'
    )
    from ctxbench.engines.prom import parse_metrics

    common = common_metrics(parse_metrics(text))
    assert common["kv_cache_usage"] == 0.25 and common["prompt_tokens"] == 150
