"""Token counters from the vocabulary inside a GGUF file, counting as llama.cpp's server does.

- Byte-level BPE (`tokenizer.ggml.model = "gpt2"`: Llama 3, Qwen, SmolLM...): a `tokenizers` BPE built from
  the tokens and merges.
- SentencePiece (`"llama"`: Llama 2, Mistral, Gemma...): a `sentencepiece` BPE model built from the tokens,
  scores and types. llama.cpp's SPM tokenizer is a port of sentencepiece's BPE encoder (the highest-scoring
  pair merges first, the leftmost among equals; a character outside the vocabulary falls back to byte tokens),
  so the library counts what the server counts. llama.cpp's rules around it are kept here: a space before the
  text and after every special token when `tokenizer.ggml.add_space_prefix` (default true), special tokens
  matched as one token each in a chat prompt.
- Either way, a chat prompt gets one BOS first when `tokenizer.ggml.add_bos_token` says so, and a BOS the
  template wrote itself is dropped (llama.cpp's chat code removes it to avoid two).

Other vocabularies (WordPiece, Unigram, RWKV) are refused with an error that names the way out:
`tokenizer = "server"`, which counts with the server's own `/tokenize`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import TokenizerError
from .tokens import ANCHOR, HfTokenCounter, TemplatedCounter, memo_for

# GGUF token types (gguf.TokenType), the same numbers as sentencepiece's piece types.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def not_gguf(model: Path) -> str | None:
    """Why llama.cpp, or ctxbench's reader of its vocabulary, cannot load `model` (a directory, a file
    without the GGUF magic), or None."""
    if model.is_dir():
        return f"{str(model)!r} is a directory; llama.cpp loads one .gguf file (`ctxbench model prepare`)"
    try:
        with model.open("rb") as file:
            magic = file.read(4)
    except OSError as exc:
        return f"cannot read {str(model)!r} ({exc.strerror})"
    if magic != b"GGUF":
        return (
            f"{str(model)!r} is not a GGUF file (it starts with {magic!r}, not b'GGUF'); give the .gguf "
            "file itself, not a text file or a partial download"
        )
    return None


class GgufVocabulary:
    """The tokenizer fields of a GGUF header."""

    def __init__(self, path: Path) -> None:
        import gguf

        self.path = path
        # said in ctxbench's words first: the gguf library's ("GGUF magic invalid") name nothing to do
        if (problem := not_gguf(path)) is not None:
            raise TokenizerError(problem)
        try:
            self._reader = gguf.GGUFReader(str(path))
        except Exception as exc:  # gguf raises plain errors on a truncated or foreign file
            raise TokenizerError(f"cannot read {path} as GGUF ({exc}): a truncated download?") from exc
        self.kind = self.field("tokenizer.ggml.model")
        self.tokens: list[str] = self.field("tokenizer.ggml.tokens") or []
        self.types: list[int] = self.field("tokenizer.ggml.token_type") or [NORMAL] * len(self.tokens)
        self.template: str | None = self.field("tokenizer.chat_template")

    def field(self, name: str) -> Any:
        item = self._reader.fields.get(name)
        return None if item is None else item.contents()

    def token_text(self, key: str) -> str | None:
        index = self.field(key)
        return None if index is None or not 0 <= int(index) < len(self.tokens) else self.tokens[int(index)]

    def special_texts(self) -> dict[str, str]:
        found = {
            "bos_token": self.token_text("tokenizer.ggml.bos_token_id"),
            "eos_token": self.token_text("tokenizer.ggml.eos_token_id"),
        }
        return {key: text for key, text in found.items() if text is not None}


def gguf_token_counter(path: Path) -> HfTokenCounter | SentencePieceCounter:
    """The counter for the vocabulary stored in the GGUF file at `path`."""
    vocabulary = GgufVocabulary(path)
    if vocabulary.kind == "gpt2":
        return _bpe_counter(vocabulary)
    if vocabulary.kind == "llama":
        return SentencePieceCounter(vocabulary)
    raise TokenizerError(
        f"{path} uses a {vocabulary.kind!r} vocabulary; ctxbench reads byte-level BPE ('gpt2') and "
        "SentencePiece ('llama') GGUF vocabularies. Count with the server's own tokenizer instead: "
        'tokenizer = "server" in the campaign file, or --tokenizer server.'
    )


def _bpe_counter(vocabulary: GgufVocabulary) -> HfTokenCounter:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = vocabulary.tokens
    merges = [tuple(m.split(" ", 1)) for m in vocabulary.field("tokenizer.ggml.merges") or []]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    control = [
        AddedToken(t, special=True, normalized=False)
        for t, k in zip(tokens, vocabulary.types, strict=True)
        if k == CONTROL
    ]
    tokenizer.add_special_tokens(control)
    special = vocabulary.special_texts()
    adds_bos = bool(vocabulary.field("tokenizer.ggml.add_bos_token"))
    return HfTokenCounter(
        tokenizer,
        vocabulary.template,
        special,
        f"gguf:{vocabulary.path}",
        leading_bos=special.get("bos_token") if adds_bos else None,
    )


class SentencePieceCounter(TemplatedCounter):
    """A GGUF's SentencePiece vocabulary, counted by the `sentencepiece` library as llama.cpp counts it."""

    def __init__(self, vocabulary: GgufVocabulary) -> None:
        import sentencepiece

        self.source = f"gguf:{vocabulary.path}"
        self.chat_template = vocabulary.template
        self._special = vocabulary.special_texts()
        self._space_prefix = _flag(vocabulary.field("tokenizer.ggml.add_space_prefix"), True)
        adds_bos = _flag(vocabulary.field("tokenizer.ggml.add_bos_token"), True)
        self._leading_bos = self._special.get("bos_token") if adds_bos else None
        # Special tokens are matched in a chat prompt as whole tokens, longest first (llama.cpp's partition).
        kinds = zip(vocabulary.tokens, vocabulary.types, strict=True)
        specials = sorted({t for t, k in kinds if k in (CONTROL, USER_DEFINED) and t}, key=len, reverse=True)
        self._specials = re.compile("|".join(map(re.escape, specials))) if specials else None
        self._processor = sentencepiece.SentencePieceProcessor()
        try:
            self._processor.LoadFromSerializedProto(_model_proto(vocabulary))
        except (RuntimeError, OSError) as exc:
            raise TokenizerError(
                f"{vocabulary.path}: sentencepiece cannot load its vocabulary ({exc}); count with the "
                'server\'s tokenizer instead (tokenizer = "server", or --tokenizer server).'
            ) from exc
        self._anchor = self._raw([ANCHOR])[0]
        self._memo = memo_for(self, specials)

    def close(self) -> None:
        pass

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Each text as it stands inside a prompt, after the end of a sentence (`ANCHOR`): no space prefix."""
        if not texts:
            return []
        return [n - self._anchor for n in self._raw([ANCHOR + t for t in texts])]

    def _raw(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self._processor.encode(list(texts))]

    def count_rendered(self, prompt: str) -> int:
        """A rendered prompt's tokens: special tokens one each, the text between them with llama.cpp's space
        before the first fragment and after each special token."""
        total = 0
        fragments: list[str] = []
        after_special = True
        position = 0
        matches = self._specials.finditer(prompt) if self._specials else iter(())
        for match in [*matches, None]:
            end = len(prompt) if match is None else match.start()
            if end > position:
                text = prompt[position:end]
                fragments.append(" " + text if self._space_prefix and after_special else text)
                after_special = False
            if match is not None:
                total += 1
                after_special = True
                position = match.end()
        return total + sum(self._raw(fragments))


def _flag(value: object, default: bool) -> bool:
    return default if value is None else bool(value)


def _model_proto(vocabulary: GgufVocabulary) -> bytes:
    """A sentencepiece BPE model of the GGUF's pieces, scores and types, with no normalisation beyond
    spaces written as U+2581 (llama.cpp's escape) and no space prefix (added by the caller where llama.cpp
    adds it)."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    scores: list[float] = vocabulary.field("tokenizer.ggml.scores") or [0.0] * len(vocabulary.tokens)
    # protobuf-generated module: its classes are made at import time, invisible to a type checker
    model = model_pb2.ModelProto()  # type: ignore[attr-defined]
    for text, score, kind in zip(vocabulary.tokens, scores, vocabulary.types, strict=True):
        model.pieces.add(piece=text, score=float(score), type=kind if NORMAL <= kind <= BYTE else NORMAL)
    if UNKNOWN not in vocabulary.types:  # sentencepiece needs one; llama.cpp never emits it for text
        model.pieces.add(piece="<ctxbench-unk>", score=0.0, type=UNKNOWN)
    # the same generated module: TrainerSpec too is made at import time
    model.trainer_spec.model_type = model_pb2.TrainerSpec.BPE  # type: ignore[attr-defined]
    model.trainer_spec.byte_fallback = BYTE in vocabulary.types
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = False
    model.normalizer_spec.remove_extra_whitespaces = False
    model.normalizer_spec.escape_whitespaces = True
    return model.SerializeToString()
