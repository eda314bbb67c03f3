"""The planner calibrated on a run: prefills built by hand from a known cost model must be predicted back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbench.checks.ramp.table import rows_from_records, run_rows
from ctxbench.plan import DenseShape, predicted_prefill_s
from ctxbench.records import Chunk, RequestRecord, Usage
from ctxbench.results.calibration import CalibrationError, calibrate, solo_prefills
from ctxbench.store.run_dir import RunDir

SHAPE = DenseShape(n_layer=4, n_embd=1024, n_head=16, n_head_kv=4, head_dim=64, n_ff=2816)
TFLOPS = 785.0
RATE, PER_TOKEN_S = 64.0, 7e-6  # the engine this run pretends to measure: 64 TFLOP/s plus 7 us a new token


def engine_time(new: int, cached: int) -> float:
    return predicted_prefill_s(SHAPE, new, cached, RATE) + PER_TOKEN_S * new


def prefill(
    request_id: str,
    context: int,
    cached: int,
    sent_s: float,
    *,
    ttft_s: float | None = None,
    labels: dict[str, str] | None = None,
) -> RequestRecord:
    ttft = engine_time(context - cached, cached) if ttft_s is None else ttft_s
    first = int((sent_s + ttft) * 1e9)
    return RequestRecord(
        request_id=request_id,
        endpoint="chat",
        url="http://127.0.0.1:1/v1/chat/completions",
        model="m",
        labels=labels or {"check": "needle", "length": str(context), "depth": "0.50"},
        request_bytes=10,
        enqueued_ns=int(sent_s * 1e9),
        sent_ns=int(sent_s * 1e9),
        end_ns=first + 10**8,
        chunks=(Chunk(arrived_ns=first, text="a"), Chunk(arrived_ns=first + 10**8, text="b")),
        usage=Usage(prompt_tokens=context, completion_tokens=2, cached_tokens=cached),
    )


def run_with(tmp_path: Path, records: list[RequestRecord]) -> RunDir:
    run = RunDir.create(tmp_path, "calibration")
    run.write_manifest(
        {
            "deployment": "d",
            "model_shape": {
                "n_layer": 4,
                "n_embd": 1024,
                "n_head": 16,
                "n_head_kv": 4,
                "head_dim": 64,
                "n_ff": 2816,
            },
            "engine": {"context_limit_per_slot": 1049600},
            "campaign_file_deployment": {"ctx_size": 2099200, "parallel": 2},
        }
    )
    for record in records:
        run.append(record)
    run.sync()
    return run


def test_two_points_recover_the_rate_and_the_per_token_cost_and_predict_the_rest(tmp_path: Path) -> None:
    t = 0.0
    records = []
    for index, (context, cached) in enumerate(
        [(32768, 0), (100_000, 60_000), (400_000, 300_000), (1_048_576, 0)]
    ):
        records.append(prefill(f"p{index}", context, cached, t))
        t += 400
    result = calibrate([run_with(tmp_path, records)], tflops=TFLOPS)
    assert [p.request_id for p in result.points] == ["p0", "p3"]  # the shortest and the longest by FLOPs
    assert result.efficiency * TFLOPS == pytest.approx(RATE, rel=1e-9)
    assert result.per_token_s == pytest.approx(PER_TOKEN_S, rel=1e-9)
    assert result.worst_error == pytest.approx(0.0, abs=1e-9)
    # The KV the planner predicts for 2 x 1,049,600 tokens: 4 layers x 2 x 4 heads x 64 x 2 bytes a token.
    assert result.kv_predicted_bytes == 4096 * 2099200


def test_one_point_is_a_constant_efficiency_that_misses_the_per_token_cost(tmp_path: Path) -> None:
    records = [prefill("short", 32768, 0, 0.0), prefill("long", 1_048_576, 0, 100.0)]
    result = calibrate([run_with(tmp_path, records)], tflops=TFLOPS, points=["long"])
    assert result.per_token_s == 0.0
    short = next(p for p in result.predictions if p.prefill.request_id == "short")
    assert short.error < -0.2  # the short prefill's fixed cost is what a FLOPs count cannot see


def test_a_prefill_that_overlapped_another_request_is_not_a_measurement_of_it(tmp_path: Path) -> None:
    alone = prefill("alone", 200_000, 0, 0.0)
    crowded = prefill("crowded", 200_000, 0, 100.0)
    neighbour = prefill("neighbour", 2048, 0, 100.5)
    assert [p.request_id for p in solo_prefills([alone, crowded, neighbour])] == ["alone"]


def test_an_unknown_point_names_the_usable_ones(tmp_path: Path) -> None:
    run = run_with(tmp_path, [prefill("only", 65536, 0, 0.0)])
    with pytest.raises(CalibrationError, match="'nope' is not a solo prefill.*only"):
        calibrate([run], tflops=TFLOPS, points=["nope"])


def ramp_record(turn: int, sent_s: float, value: str, answer: str) -> RequestRecord:
    record = prefill(
        f"ramp-u1-user0-turn{turn}",
        32768 * turn,
        0,
        sent_s,
        labels={
            "check": "ramp",
            "users": "1",
            "user": "0",
            "turn": str(turn),
            "target_tokens": str(32768 * turn),
            "intended_cached_tokens": "0",
            "needle_value": value,
        },
    )
    return record.model_copy(
        update={"chunks": (Chunk(arrived_ns=record.chunks[0].arrived_ns, text=answer), record.chunks[1])}
    )


def test_an_interrupted_ramp_keeps_its_measured_turns_in_the_run_rows(tmp_path: Path) -> None:
    records = [ramp_record(1, 0.0, "4821", "the code is 4821"), ramp_record(2, 50.0, "4821", "no idea")]
    run = run_with(tmp_path, records)  # the setting never ended: ramp1m.csv holds no row of it
    rows = run_rows(
        tmp_path / "ramp1m.csv", run.run_id, records, deployment="d", source_file="runs/x/requests.jsonl"
    )
    assert [(r.turn, r.recall, r.context_tokens) for r in rows] == [
        ("1", "1", "32768"),
        ("2", "0", "65536"),
    ]
    assert rows == rows_from_records(
        records, deployment="d", run_id=run.run_id, source_file="runs/x/requests.jsonl"
    )


def test_a_recorded_shape_without_a_dense_ffn_is_a_named_error(tmp_path: Path) -> None:
    run = run_with(tmp_path, [prefill("only", 65536, 0, 0.0)])
    manifest = json.loads((run.path / "manifest.json").read_text())
    del manifest["model_shape"]["n_ff"]
    run.write_manifest(manifest)
    with pytest.raises(CalibrationError, match="lacks 'n_ff'.*--config"):
        calibrate([run], tflops=TFLOPS)


def test_the_engines_own_prompt_time_is_the_prefill_and_the_ttft_stays_beside_it(tmp_path: Path) -> None:
    """llama.cpp's TTFT also holds saving the idle slot's prompt into its host cache: not prefill work."""
    short, long = prefill("short", 32768, 0, 0.0), prefill("long", 1_048_576, 0, 100.0)
    engine_s = engine_time(32768, 0)
    saved = short.model_copy(
        update={
            "chunks": tuple(
                c.model_copy(update={"arrived_ns": c.arrived_ns + 3 * 10**9}) for c in short.chunks
            ),
            "end_ns": short.end_ns + 3 * 10**9,
            "server_timings": {"prompt_n": 32768, "prompt_ms": engine_s * 1000, "cache_n": 0},
        }
    )
    # not this prefill's tokens: not used
    mismatched = prefill("other", 65536, 0, 400.0).model_copy(
        update={"server_timings": {"prompt_n": 100, "prompt_ms": 1.0}}
    )
    found = {p.request_id: p for p in solo_prefills([saved, long, mismatched])}
    assert found["short"].source == "engine" and found["short"].measured_s == pytest.approx(engine_s)
    assert found["short"].ttft_s == pytest.approx(engine_s + 3, abs=1e-6)
    assert found["other"].source == "ttft" and found["long"].source == "ttft"
    result = calibrate([run_with(tmp_path, [saved, long])], tflops=TFLOPS)
    assert result.per_token_s == pytest.approx(PER_TOKEN_S, rel=1e-6)  # the 3 s of TTFT did not enter the fit


def test_each_request_is_labelled_by_its_own_check() -> None:
    """`Check.label`: the calibration table names a request as its check says it, any other by its check."""
    from ctxbench.results.calibration import label_of

    def labelled(labels: dict[str, str]) -> str:
        return label_of(prefill("r", 4096, 0, 0.0, labels=labels))

    assert labelled({"check": "needle", "length": "4096", "depth": "0.50"}) == "needle 4096 d=0.50"
    assert labelled({"check": "ramp", "users": "2", "user": "1", "turn": "3"}) == "ramp u2 user 1 turn 3"
    assert labelled({"check": "capacity", "prompt": "near_limit"}) == "capacity near_limit"
    assert labelled({"check": "trace"}) == "trace"
    assert labelled({"phase": "short"}) == "?"  # a record with no check label
