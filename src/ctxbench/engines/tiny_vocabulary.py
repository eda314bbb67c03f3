"""The tiny model's tokenizer, trained on ctxbench's own prose, and the GGUF fields that carry it.

Two kinds, as public GGUF files carry them: byte-level BPE (`tokenizers`; also saved as a Hugging Face
directory) and SentencePiece BPE (`sentencepiece`, byte fallback, a BOS before every prompt, as Llama 2 and
Mistral files have). Deterministic: the same seed trains the same vocabulary.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..text.corpus import ProseGenerator

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def train_bpe(vocab_size: int, seed: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    prose = ProseGenerator(f"tiny-tokenizer-{seed}")
    tokenizer.train_from_iterator((prose.paragraph() for _ in range(4000)), trainer)
    return tokenizer


@dataclass(frozen=True)
class Vocabulary:
    """A tokenizer as the GGUF fields llama.cpp reads."""

    model: str  # tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
    tokens: list[str]
    types: list[int]
    bos: str
    eos: str
    add_bos: bool
    merges: list[str] | None = None  # BPE
    scores: list[float] | None = None  # SentencePiece
    unk: str | None = None


def train_sentencepiece(vocab_size: int, seed: int, model_file: Path) -> Vocabulary:
    """A SentencePiece BPE vocabulary trained on the same prose (also saved as `model_file`)."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    prose = ProseGenerator(f"tiny-tokenizer-{seed}")
    written = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=(prose.paragraph() for _ in range(4000)),
        model_writer=written,
        model_type="bpe",
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        control_symbols=[t for t in SPECIAL_TOKENS if t != "<|endoftext|>"],
        num_threads=1,
        minloglevel=2,
    )
    model_file.write_bytes(written.getvalue())
    # protobuf-generated module: its classes are made at import time, invisible to a type checker
    pieces = model_pb2.ModelProto.FromString(written.getvalue()).pieces  # type: ignore[attr-defined]
    return Vocabulary(
        model="llama",
        tokens=[p.piece for p in pieces],
        types=[int(p.type) for p in pieces],  # sentencepiece's piece types are GGUF's token types
        scores=[p.score for p in pieces],
        bos="<s>",
        eos="<|im_end|>",
        unk="<unk>",
        add_bos=True,
    )


def bpe_vocabulary(tokenizer: Any) -> Vocabulary:
    """The byte-level BPE tokenizer as GGUF fields."""
    import gguf

    vocab = tokenizer.get_vocab()
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    merges = [
        m if isinstance(m, str) else " ".join(m) for m in json.loads(tokenizer.to_str())["model"]["merges"]
    ]
    special = {vocab[t] for t in SPECIAL_TOKENS}
    types = [gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(len(tokens))]
    return Vocabulary(
        model="gpt2",
        tokens=tokens,
        types=[int(t) for t in types],
        merges=merges,
        bos="<|endoftext|>",
        eos="<|im_end|>",
        add_bos=False,
    )


def save_hf_tokenizer(tokenizer: Any, directory: Path, context_length: int) -> None:
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": context_length,
        "chat_template": CHATML_TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
