"""Planning arithmetic for dense transformer decoders: prefill FLOPs, a prefill-time estimate from a
measured matrix-multiply rate, and KV-cache bytes per token.

Only the dense llama shape is modelled so far (no MoE, MLA, sliding windows or hybrid layers).
"""

from __future__ import annotations

from dataclasses import dataclass


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
            n_layer=config["num_hidden_layers"], n_embd=config["hidden_size"], n_head=n_head,
            n_head_kv=config.get("num_key_value_heads", n_head),
            head_dim=config.get("head_dim", config["hidden_size"] // n_head), n_ff=config["intermediate_size"],
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
    return 2.0 * shape.linear_params * new_tokens + 4.0 * shape.n_layer * shape.n_head * shape.head_dim * pairs


def predicted_prefill_s(shape: DenseShape, new_tokens: int, cached_tokens: int, tflops: float) -> float:
    """The prefill time if every FLOP ran at `tflops` (a measured matrix-multiply rate): a lower bound."""
    return prefill_flops(shape, new_tokens, cached_tokens) / (tflops * 1e12)
