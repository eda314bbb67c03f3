"""Planning arithmetic on shapes whose numbers can be checked by hand."""

from __future__ import annotations

import pytest

from ctxbench.plan import DenseShape, predicted_prefill_s, prefill_flops

LLAMA_8B = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
}


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


def test_plan_command_prints_kv_and_prefill(tmp_path) -> None:
    import json

    from cli_main import run_main

    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_8B))
    result = run_main(
        [
            "plan",
            "--config",
            str(config),
            "--context",
            "1M",
            "--users",
            "4",
            "--gpus",
            "4",
            "--weights-gb",
            "16",
            "--decode-tokens-per-s",
            "3500",
        ],
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich wraps lines at the terminal's width
    assert "128.0 KiB a token" in text and "128.0 GiB for one user at 1048576 tokens" in text
    assert "3 user(s) fit at 1048576 tokens; 4 need KV offload or more GPUs" in text
    assert "cost: $1.11 per million output tokens" in text  # $14 an hour / 12.6M tokens an hour


from ctxbench.plan import kv_layout, users_that_fit  # noqa: E402

# The few fields each family's published config.json has that decide its KV cache.
DEEPSEEK_V3 = {
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
}
GEMMA2_9B = {
    "num_hidden_layers": 42,
    "hidden_size": 3584,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "sliding_window": 4096,
    "layer_types": ["sliding_attention", "full_attention"] * 21,
}
QWEN3_NEXT = {
    "num_hidden_layers": 48,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "full_attention_interval": 4,
}
MISTRAL_7B_V01 = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "sliding_window": 4096,
}


def test_gqa_kv_of_llama_8b_is_128_kib_a_token() -> None:
    layout = kv_layout(LLAMA_8B)
    assert layout.kind == "GQA" and layout.bytes_at(1) == 131072
    assert layout.bytes_at(1_000_000) == pytest.approx(131.072e9)


def test_mla_keeps_one_latent_a_layer() -> None:
    layout = kv_layout(DEEPSEEK_V3)  # (512 + 64) x 2 bytes x 61 layers = 70,272 bytes a token
    assert layout.kind == "MLA" and layout.bytes_at(1) == 70272
    assert kv_layout(DEEPSEEK_V3, "fp8").bytes_at(1) == 35136


def test_sliding_window_layers_stop_growing_at_the_window() -> None:
    layout = kv_layout(GEMMA2_9B)
    per_layer = 2 * 8 * 256 * 2
    assert layout.bytes_at(8192) == per_layer * (21 * 8192 + 21 * 4096)
    assert kv_layout(MISTRAL_7B_V01).bytes_at(1_000_000) == 2 * 8 * 128 * 2 * 32 * 4096


def test_linear_attention_layers_hold_no_growing_kv() -> None:
    layout = kv_layout(QWEN3_NEXT)  # 12 of 48 layers are full attention
    assert layout.full_layers == 12 and layout.bytes_at(1) == 12 * 2 * 2 * 256 * 2
    assert "linear attention" in layout.kind


def test_users_that_fit_beside_the_weights() -> None:
    # 4 x 141 GB, 10% reserve, 16 GB of weights, 131 GB of KV per 1M-token user: 3 users.
    assert users_that_fit(4, 141e9, 16e9, kv_layout(LLAMA_8B).bytes_at(1_000_000)) == 3
    assert users_that_fit(1, 141e9, 140e9, 1e9) == 0


def test_plan_reads_weight_bytes_from_a_checkpoint(tmp_path) -> None:
    import json

    from cli_main import run_main
    from test_checkpoint import write  # the same tiny safetensors writer

    write(tmp_path / "ckpt" / "model.safetensors", {"w.weight": ("BF16", (1000, 1000))})
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DEEPSEEK_V3))
    result = run_main(
        ["plan", "--config", str(config), "--checkpoint", str(tmp_path / "ckpt"), "--context", "128K"]
    )
    assert result.exit_code == 0, result.output
    assert "weights 0.0 GB" in " ".join(result.output.split()) and "MLA" in result.output


def test_the_forecast_is_a_library_function_the_plan_command_prints() -> None:
    from ctxbench.plan import forecast, kv_layout

    common = {
        "gpus": 4,
        "gpu_memory_bytes": 141e9,
        "kv_dtype": "bf16",
        "tflops": 789.0,
        "price_per_gpu_hour": 3.5,
    }
    dense = forecast(LLAMA_8B, tokens=1 << 20, users=40, decode_tokens_per_s=900.0, **common)
    per_user = kv_layout(LLAMA_8B, "bf16").bytes_at(1 << 20)
    assert dense.kv_per_user_bytes == per_user and dense.weight_bytes is not None
    assert dense.users_fit == int((4 * 141e9 * 0.9 - dense.weight_bytes) // per_user)
    assert dense.offload_needed == (dense.users_fit < 40)
    assert dense.prefill_s is not None and dense.prefill_s > 0
    assert dense.cost_per_million_output == pytest.approx(3.5 * 4 / (900 * 3600 / 1e6))
    moe = forecast(DEEPSEEK_V3, tokens=131072, users=1, **common)  # no weights given: not estimated
    assert moe.weight_bytes is None and moe.users_fit is None and moe.prefill_s is None
    assert moe.cost_per_million_output is None and not moe.offload_needed
