"""Planning arithmetic on shapes whose numbers can be checked by hand."""

from __future__ import annotations

import pytest

from ctxbench.plan import DenseShape, predicted_prefill_s, prefill_flops

LLAMA_8B = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
            "intermediate_size": 14336}


def test_llama_8b_shape_has_its_known_parameter_count_and_kv_size() -> None:
    shape = DenseShape.from_hf_config(LLAMA_8B)
    assert shape.head_dim == 128
    # 8.03B parameters in all, minus two 128256 x 4096 embedding matrices, minus the norms.
    assert shape.linear_params == pytest.approx(6.98e9, rel=0.01)
    assert shape.kv_bytes_per_token() == 131072  # 128 KiB a token in 16-bit


def test_prefill_flops_split_into_weights_and_causal_attention() -> None:
    shape = DenseShape(n_layer=1, n_embd=64, n_head=1, n_head_kv=1, head_dim=64, n_ff=64)
    weights = 2 * shape.linear_params * 10
    assert prefill_flops(shape, 10) == weights + 4 * 64 * 55
    assert prefill_flops(shape, 10, cached_tokens=100) == weights + 4 * 64 * (1000 + 55)


def test_prediction_divides_by_the_rate() -> None:
    shape = DenseShape.from_hf_config(LLAMA_8B)
    assert predicted_prefill_s(shape, 1000, 0, 1.0) == pytest.approx(prefill_flops(shape, 1000) / 1e12)


def test_plan_command_prints_kv_and_prefill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from typer.testing import CliRunner

    from ctxbench.cli import app

    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_8B))
    result = CliRunner().invoke(app, ["plan", "--config", str(config), "--context", "128K", "--users", "2"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich wraps lines at the terminal's width
    assert "128 KiB a token" in text and "32.0 GiB for 2 user(s) at 131072 tokens" in text
