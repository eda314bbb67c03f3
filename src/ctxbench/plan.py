"""Planning arithmetic: prefill FLOPs of dense transformer decoders, a prefill-time estimate from a measured
matrix-multiply rate, KV-cache bytes per token (MHA, GQA, MLA, sliding windows, linear-attention layers),
users that fit beside the weights, cost per million tokens, and the forecast `ctxbench plan` prints
(`forecast`). Prefill FLOPs are modelled for the dense llama shape only (no MoE).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DenseShape:
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int

    @classmethod
    def from_hf_config(cls, config: dict[str, int]) -> DenseShape:
        """From a Hugging Face `config.json` of a llama-style model."""
        n_head = config["num_attention_heads"]
        return cls(
            n_layer=config["num_hidden_layers"],
            n_embd=config["hidden_size"],
            n_head=n_head,
            n_head_kv=config.get("num_key_value_heads", n_head),
            head_dim=config.get("head_dim", config["hidden_size"] // n_head),
            n_ff=config["intermediate_size"],
        )

    @property
    def linear_params(self) -> int:
        """Weights every token multiplies through: Q, K, V, O projections and the gated FFN, all layers."""
        attention = self.n_embd * self.head_dim * (2 * self.n_head + 2 * self.n_head_kv)
        return self.n_layer * (attention + 3 * self.n_embd * self.n_ff)

    def kv_bytes_per_token(self, bytes_per_value: float = 2.0) -> float:
        """KV cache = 2 (K and V) x layers x KV heads x head size x bytes per value."""
        return 2 * self.n_layer * self.n_head_kv * self.head_dim * bytes_per_value


def prefill_flops(shape: DenseShape, new_tokens: int, cached_tokens: int = 0) -> float:
    """Prefill FLOPs = 2 x linear params x new tokens
    + attention: 4 x layers x heads x head size x (query, key) pairs, causal;
    the i-th new token (1-based) attends to cached + i keys, so pairs = new x cached + new x (new + 1) / 2.
    The output layer is left out: servers compute logits for the last token only."""
    pairs = new_tokens * cached_tokens + new_tokens * (new_tokens + 1) / 2
    return (
        2.0 * shape.linear_params * new_tokens + 4.0 * shape.n_layer * shape.n_head * shape.head_dim * pairs
    )


def predicted_prefill_s(shape: DenseShape, new_tokens: int, cached_tokens: int, tflops: float) -> float:
    """The prefill time if every FLOP ran at `tflops` (a measured matrix-multiply rate): a lower bound."""
    return prefill_flops(shape, new_tokens, cached_tokens) / (tflops * 1e12)


BYTES_PER_VALUE = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "f32": 4.0, "q8_0": 1.0625, "q4_0": 0.5625}


@dataclass(frozen=True)
class KvLayout:
    """How a model's KV cache grows: per token and layer, for layers over the full context and for
    sliding-window layers; layers of linear attention hold state that does not grow and are left out."""

    kind: str
    bytes_per_token_layer: float
    full_layers: int
    window_layers: int
    window: int | None

    def bytes_at(self, context: int) -> float:
        """KV bytes one sequence of `context` tokens holds."""
        windowed = min(context, self.window) if self.window else context
        return self.bytes_per_token_layer * (self.full_layers * context + self.window_layers * windowed)


def kv_layout(config: dict[str, object], kv_dtype: str = "bf16") -> KvLayout:
    """From a Hugging Face `config.json`: MHA/GQA (2 x KV heads x head size), MLA (one latent of
    `kv_lora_rank` + `qk_rope_head_dim`), sliding-window layers (`layer_types` or `sliding_window`),
    hybrid linear-attention layers (`layer_types` "linear_attention" or `full_attention_interval`)."""
    value = BYTES_PER_VALUE[kv_dtype]
    c: dict[str, int] = {k: v for k, v in config.items() if isinstance(v, int)}
    layers = c["num_hidden_layers"]
    if "kv_lora_rank" in c:
        kind, per = "MLA", (c["kv_lora_rank"] + c.get("qk_rope_head_dim", 0)) * value
    else:
        heads = c["num_attention_heads"]
        head_dim = c.get("head_dim", c["hidden_size"] // heads)
        kind, per = (
            "GQA" if c.get("num_key_value_heads", heads) < heads else "MHA",
            2 * c.get("num_key_value_heads", heads) * head_dim * value,
        )
    types = config.get("layer_types")
    window = c.get("sliding_window")
    if isinstance(types, list) and types:
        full = sum(1 for t in types if t == "full_attention")
        sliding = sum(1 for t in types if t == "sliding_attention")
        if any(t == "linear_attention" for t in types):
            kind += " + linear attention"
    elif "full_attention_interval" in c:
        full, sliding = layers // c["full_attention_interval"], 0
        kind += " + linear attention"
    elif window and config.get("use_sliding_window", True) is not False:
        full, sliding = 0, layers
    else:
        full, sliding, window = layers, 0, None
    return KvLayout(kind, per, full, sliding, window if sliding else None)


def users_that_fit(
    gpus: int,
    gpu_memory_bytes: float,
    weight_bytes: float,
    kv_per_user_bytes: float,
    reserve_fraction: float = 0.1,
) -> int:
    """Users whose KV fits beside the weights: (GPUs x memory x (1 - reserve) - weights) / KV per user."""
    free = gpus * gpu_memory_bytes * (1 - reserve_fraction) - weight_bytes
    return max(0, int(free // kv_per_user_bytes)) if kv_per_user_bytes > 0 else 0


def cost_per_million(price_per_gpu_hour: float, gpus: int, seconds: float, tokens: float) -> float | None:
    """Cost per million tokens = price per GPU-hour x GPUs x hours / (tokens / 1e6)."""
    if gpus <= 0 or tokens <= 0 or seconds <= 0:
        return None
    return price_per_gpu_hour * gpus * (seconds / 3600) / (tokens / 1e6)


@dataclass(frozen=True)
class Forecast:
    """Users x context on a node, from a model's config.json: KV bytes, who fits, a prefill, a cost."""

    layout: KvLayout
    kv_dtype: str
    tokens: int  # the context each user holds
    users: int
    gpus: int
    gpu_memory_bytes: float
    kv_per_user_bytes: float
    weight_bytes: float | None  # None: not known (a mixture of experts, with neither weights nor checkpoint)
    users_fit: int | None  # None: the weights are not known
    tflops: float  # the rate a prefill is predicted at: measured matmul rate x efficiency
    efficiency: float
    shape: DenseShape | None  # None: not a dense model, so no prefill FLOPs
    prefill_s: float | None
    decode_tokens_per_s: float | None
    price_per_gpu_hour: float
    cost_per_million_output: float | None  # None: no decode rate given

    @property
    def offload_needed(self) -> bool:
        return self.users_fit is not None and self.users_fit < self.users


def forecast(
    config: dict[str, Any],
    *,
    tokens: int,
    users: int,
    gpus: int,
    gpu_memory_bytes: float,
    kv_dtype: str,
    tflops: float,
    price_per_gpu_hour: float,
    weight_bytes: float | None = None,
    efficiency: float = 1.0,
    decode_tokens_per_s: float | None = None,
) -> Forecast:
    """What `ctxbench plan` prints, as numbers. `weight_bytes` None: 2 bytes a parameter of a dense model
    (embeddings and output included), unknown for a mixture of experts."""
    layout = kv_layout(config, kv_dtype)
    moe = any(k in config for k in ("n_routed_experts", "num_experts", "num_local_experts"))
    shape = None if moe or "intermediate_size" not in config else DenseShape.from_hf_config(config)
    if weight_bytes is None and shape is not None:
        weight_bytes = 2.0 * (shape.linear_params + 2 * int(config.get("vocab_size", 0)) * shape.n_embd)
    per_user = layout.bytes_at(tokens)
    rate = tflops * efficiency
    return Forecast(
        layout=layout,
        kv_dtype=kv_dtype,
        tokens=tokens,
        users=users,
        gpus=gpus,
        gpu_memory_bytes=gpu_memory_bytes,
        kv_per_user_bytes=per_user,
        weight_bytes=weight_bytes,
        users_fit=None
        if weight_bytes is None
        else users_that_fit(gpus, gpu_memory_bytes, weight_bytes, per_user),
        tflops=rate,
        efficiency=efficiency,
        shape=shape,
        prefill_s=None if shape is None else predicted_prefill_s(shape, tokens, 0, rate),
        decode_tokens_per_s=decode_tokens_per_s,
        price_per_gpu_hour=price_per_gpu_hour,
        cost_per_million_output=None
        if not decode_tokens_per_s
        else cost_per_million(price_per_gpu_hour, gpus, 3600, decode_tokens_per_s * 3600),
    )
