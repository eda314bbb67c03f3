"""What a checkpoint really stores: safetensors headers read, weights never loaded, nothing unpickled.

The seed found two checkpoints both called FP8 that stored different things. A safetensors file starts
with an 8-byte little-endian header length, then that many bytes of JSON naming every tensor's dtype,
shape and byte range. From the headers alone this module reports, per dtype, parameters and bytes;
finds scale tensors and infers the quantization scheme (FP8 per-tensor, per-channel or 128x128 blocks;
MXFP8 and MXFP4 with E8M0 scales per 32 elements; NVFP4 with FP8 scales per 16 and a global scale);
lists the 2-D weights left unquantized; and compares with `config.json` `quantization_config` and with
the label in the checkpoint's name.
"""

from __future__ import annotations

import json
import math
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CheckpointError

MAX_HEADER_BYTES = 100 * 1024 * 1024
BITS = {
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F32": 32,
    "I32": 32,
    "U32": 32,
    "F16": 16,
    "BF16": 16,
    "I16": 16,
    "U16": 16,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "I8": 8,
    "U8": 8,
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}
SCALE_SUFFIXES = ("_scale_inv", "_scale", "_scale_2", "_global_scale", "_scales")
LABELS = ("nvfp4", "mxfp4", "mxfp8", "fp8", "fp4", "int4", "int8", "bf16", "fp16")


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str

    @property
    def elements(self) -> int:
        return math.prod(self.shape) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.elements * BITS[self.dtype] // 8


def read_header(path: Path) -> list[Tensor]:
    """Every tensor a safetensors file declares, validated against the file's size."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: shorter than the 8-byte safetensors header length.")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES or length > size - 8:
                raise CheckpointError(
                    f"{path}: header length {length} exceeds the file ({size} bytes) or the "
                    f"{MAX_HEADER_BYTES}-byte bound; not a safetensors file, or a hostile one."
                )
            raw = handle.read(length)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc}).") from exc
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: the header is not valid JSON ({exc}).") from exc
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the header is not a JSON object.")
    data_bytes = size - 8 - length
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = (
                info["dtype"],
                tuple(int(d) for d in info["shape"]),
                info["data_offsets"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"{path}: tensor {name!r} has no valid dtype, shape and data_offsets."
            ) from exc
        if dtype not in BITS:
            raise CheckpointError(f"{path}: tensor {name!r} has unknown dtype {dtype!r}.")
        if not 0 <= start <= end <= data_bytes:
            raise CheckpointError(
                f"{path}: tensor {name!r} byte range [{start}, {end}) is outside the {data_bytes} data bytes."
            )
        tensors.append(Tensor(name, dtype, shape, path.name))
    return tensors


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    tensors: dict[str, Tensor]
    config: dict[str, object] | None

    @property
    def label(self) -> str | None:
        """The precision the name claims (`...-FP8`, `..._nvfp4`), if any."""
        where = self.path.resolve()
        lowered = (where.name if where.is_dir() else f"{where.parent.name}/{where.name}").lower()
        return next((label for label in LABELS if label in lowered), None)


def load_remote(repo_id: str, fetch_metadata=None) -> Checkpoint:
    """A Hub repository's headers through huggingface-hub's safetensors-metadata API (needs network access;
    `fetch_metadata` stands in for `huggingface_hub.get_safetensors_metadata` in tests)."""
    if fetch_metadata is None:
        try:
            from huggingface_hub import get_safetensors_metadata as fetch_metadata
        except ImportError as exc:
            raise CheckpointError(
                "reading a Hub repository needs `pip install huggingface-hub` and network access; "
                "or download the *.safetensors headers and give a local directory."
            ) from exc
    try:
        metadata = fetch_metadata(repo_id)
    except Exception as exc:  # the Hub client raises many kinds; all mean "could not read it"
        raise CheckpointError(f"hf://{repo_id}: could not read its safetensors metadata ({exc}).") from exc
    tensors = {}
    for file, info in metadata.files_metadata.items():
        for name, tensor in info.tensors.items():
            if tensor.dtype not in BITS:
                raise CheckpointError(f"hf://{repo_id}: tensor {name!r} has unknown dtype {tensor.dtype!r}.")
            tensors[name] = Tensor(name, tensor.dtype, tuple(tensor.shape), file)
    return Checkpoint(Path(repo_id), tensors, None)


def load_checkpoint(path: Path) -> Checkpoint:
    """A `.safetensors` file, or a directory of shards (through `model.safetensors.index.json` when
    present)."""
    if path.is_file():
        files = [path]
        config_path = path.with_name("config.json")
    elif path.is_dir():
        index = path / "model.safetensors.index.json"
        if index.exists():
            weight_map = json.loads(index.read_text()).get("weight_map", {})
            files = [path / name for name in sorted(set(weight_map.values()))]
        else:
            files = sorted(path.glob("*.safetensors"))
        config_path = path / "config.json"
    else:
        raise CheckpointError(f"{path} does not exist; give a .safetensors file or a model directory.")
    if not files:
        raise CheckpointError(f"{path} holds no .safetensors file.")
    tensors = {t.name: t for file in files for t in read_header(file)}
    config = json.loads(config_path.read_text()) if config_path.exists() else None
    return Checkpoint(path, tensors, config)


@dataclass(frozen=True)
class Report:
    checkpoint: str
    by_dtype: dict[str, tuple[int, int]]  # dtype -> (parameters, bytes)
    schemes: dict[str, int]  # scheme -> number of quantized weights
    unquantized: tuple[str, ...]
    label: str | None
    config_quantization: dict[str, object] | None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def scheme(self) -> str:
        return max(self.schemes, key=self.schemes.__getitem__) if self.schemes else "unquantized"


def _scale_of(tensors: dict[str, Tensor], weight: str) -> list[Tensor]:
    stem = weight.removesuffix(".weight")
    names = [f"{stem}.weight{s}" for s in SCALE_SUFFIXES] + [f"{stem}{s}" for s in SCALE_SUFFIXES]
    return [tensors[n] for n in names if n in tensors]


def _blocks(rows: int, cols: int, scale: Tensor) -> str:
    shape = scale.shape
    if scale.elements == 1:
        return "per-tensor"
    if shape in ((rows,), (rows, 1)):
        return "per-channel"
    if len(shape) == 2 and shape[0] == rows and shape[1] > 0:
        return f"{max(1, round(cols / shape[1]))}-element groups"
    if len(shape) == 2 and shape[0] > 0 and shape[1] > 0:
        return f"{math.ceil(rows / shape[0])}x{math.ceil(cols / shape[1])} blocks"
    return f"scale shape {list(shape)}"


def classify(tensors: dict[str, Tensor], weight: Tensor) -> str | None:
    """The scheme of one 2-D weight, or None when it is stored unquantized."""
    if len(weight.shape) != 2 or weight.dtype in ("F32", "F16", "BF16"):
        return None
    rows, cols = weight.shape
    scales = _scale_of(tensors, weight.name)
    if weight.dtype in ("F8_E4M3", "F8_E5M2"):
        if not scales:
            return f"FP8 {weight.dtype[3:]}, no scale tensor"
        scale = max(scales, key=lambda s: s.elements)
        if scale.dtype in ("F8_E8M0", "U8") and scale.shape == (rows, cols // 32):
            return "MXFP8 (E8M0 scales per 32 elements)"
        return f"FP8 {weight.dtype[3:]}, {_blocks(rows, cols, scale)} scales ({scale.dtype})"
    if weight.dtype in ("U8", "I8", "F4"):
        logical = cols * 2 if weight.dtype != "F4" else cols
        groups = [s for s in scales if len(s.shape) == 2 and s.shape[0] == rows]
        if groups:
            group = logical // groups[0].shape[1]
            if groups[0].dtype in ("F8_E8M0", "U8") and group == 32:
                return "MXFP4 (packed 4-bit, E8M0 scales per 32 elements)"
            if groups[0].dtype == "F8_E4M3" and group == 16:
                has_global = any(s.elements == 1 for s in scales)
                return "NVFP4 (packed 4-bit, FP8 scales per 16 elements" + (
                    ", global scale)" if has_global else ")"
                )
            return f"4-bit packed, {groups[0].dtype} scales per {group} elements"
        return f"{weight.dtype} weight, no scale tensor (int8 or packed without scales)"
    return f"{weight.dtype} weight"


def inspect(checkpoint: Checkpoint) -> Report:
    """Dtypes, inferred schemes, unquantized weights, and disagreements with the label and config."""
    by_dtype: dict[str, list[int]] = {}
    for tensor in checkpoint.tensors.values():
        entry = by_dtype.setdefault(tensor.dtype, [0, 0])
        entry[0] += tensor.elements
        entry[1] += tensor.nbytes
    weights = [t for name, t in checkpoint.tensors.items() if name.endswith(".weight") and len(t.shape) == 2]
    schemes: Counter[str] = Counter()
    unquantized = []
    for weight in weights:
        scheme = classify(checkpoint.tensors, weight)
        if scheme is None:
            unquantized.append(weight.name)
        else:
            schemes[scheme] += 1
    config_q = checkpoint.config.get("quantization_config") if checkpoint.config else None
    report = Report(
        str(checkpoint.path),
        {k: (v[0], v[1]) for k, v in sorted(by_dtype.items())},
        dict(schemes),
        tuple(unquantized),
        checkpoint.label,
        config_q if isinstance(config_q, dict) else None,
    )
    return Report(**{**report.__dict__, "warnings": tuple(_warnings(report))})


def _warnings(report: Report) -> list[str]:
    out = []
    scheme = report.scheme.lower()
    if (
        report.label
        and report.label not in scheme.replace(" ", "")
        and not (report.label == "fp8" and scheme.startswith("fp8"))
    ):
        out.append(f"the name says {report.label.upper()} but the weights are stored as {report.scheme}")
    q = report.config_quantization or {}
    block = q.get("weight_block_size")
    if isinstance(block, list) and len(block) == 2 and f"{block[0]}x{block[1]} blocks" not in report.scheme:
        out.append(
            f"config.json quantization_config says weight_block_size {block}, the headers show "
            f"{report.scheme}"
        )
    return out


def compare(a: Report, b: Report) -> str:
    """One sentence on whether two checkpoints store the same thing, in plain words."""
    if a.scheme == b.scheme:
        return f"both store {a.scheme}"
    said = f"both say {a.label.upper()}: " if a.label and a.label == b.label else ""
    return f"{said}one stores {a.scheme}, the other {b.scheme}"
