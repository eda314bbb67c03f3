"""The checkpoint inspector on small safetensors files of each scheme, written here (zeros, real headers)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from cli_main import run_main

from ctxbench.audits.checkpoint import BITS, CheckpointError, compare, inspect, load_checkpoint, read_header

ROWS, COLS = 256, 512


def write(
    path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]], header_length: int | None = None
) -> Path:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = max(1, int(__import__("math").prod(shape))) * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", header_length or len(raw)) + raw + bytes(offset))
    return path


def layer(weight_dtype: str, weight_shape: tuple[int, ...], **scales: tuple[str, tuple[int, ...]]):
    tensors = {
        "model.embed_tokens.weight": ("BF16", (1000, 64)),
        "lm_head.weight": ("BF16", (1000, 64)),
        "model.layers.0.mlp.up_proj.weight": (weight_dtype, weight_shape),
    }
    tensors |= {f"model.layers.0.mlp.up_proj.{name}": spec for name, spec in scales.items()}
    return tensors


SCHEMES = {
    "fp8-block": (
        layer("F8_E4M3", (ROWS, COLS), weight_scale_inv=("F32", (2, 4))),
        "FP8 E4M3, 128x128 blocks scales",
    ),
    "fp8-tensor": (layer("F8_E4M3", (ROWS, COLS), weight_scale=("F32", ())), "FP8 E4M3, per-tensor scales"),
    "fp8-channel": (
        layer("F8_E4M3", (ROWS, COLS), weight_scale=("BF16", (ROWS, 1))),
        "FP8 E4M3, per-channel scales",
    ),
    "mxfp8": (layer("F8_E4M3", (ROWS, COLS), weight_scale=("F8_E8M0", (ROWS, COLS // 32))), "MXFP8"),
    "mxfp4": (layer("U8", (ROWS, COLS // 2), weight_scale=("U8", (ROWS, COLS // 32))), "MXFP4"),
    "nvfp4": (
        layer(
            "U8", (ROWS, COLS // 2), weight_scale=("F8_E4M3", (ROWS, COLS // 16)), weight_scale_2=("F32", ())
        ),
        "NVFP4 (packed 4-bit, FP8 scales per 16 elements, global scale)",
    ),
}


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_each_scheme_is_recognized_from_headers_alone(tmp_path: Path, name: str) -> None:
    tensors, expected = SCHEMES[name]
    report = inspect(load_checkpoint(write(tmp_path / name / "model.safetensors", tensors)))
    assert report.scheme.startswith(expected), report.scheme
    assert report.unquantized == ("model.embed_tokens.weight", "lm_head.weight")


def test_parameters_and_bytes_per_dtype(tmp_path: Path) -> None:
    tensors, _ = SCHEMES["fp8-block"]
    report = inspect(load_checkpoint(write(tmp_path / "m.safetensors", tensors)))
    assert report.by_dtype["BF16"] == (128000, 256000)
    assert report.by_dtype["F8_E4M3"] == (ROWS * COLS, ROWS * COLS)
    assert report.by_dtype["F32"] == (8, 32)


def test_two_checkpoints_both_called_fp8_that_store_different_things(tmp_path: Path) -> None:
    a = inspect(
        load_checkpoint(write(tmp_path / "Model-A-FP8" / "model.safetensors", SCHEMES["fp8-block"][0]))
    )
    b = inspect(
        load_checkpoint(write(tmp_path / "Model-B-FP8" / "model.safetensors", SCHEMES["fp8-tensor"][0]))
    )
    assert a.label == b.label == "fp8" and not a.warnings and not b.warnings
    assert compare(a, b) == (
        "both say FP8: one stores FP8 E4M3, 128x128 blocks scales (F32), "
        "the other FP8 E4M3, per-tensor scales (F32)"
    )


def test_a_label_that_hides_a_different_format_is_called_out(tmp_path: Path) -> None:
    path = write(tmp_path / "Model-NVFP4" / "model.safetensors", SCHEMES["mxfp4"][0])
    (path.parent / "config.json").write_text(
        json.dumps({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    )
    report = inspect(load_checkpoint(path.parent))
    assert any("the name says NVFP4" in w for w in report.warnings)
    assert any("weight_block_size [128, 128]" in w for w in report.warnings)


def test_shards_are_read_through_the_index(tmp_path: Path) -> None:
    write(tmp_path / "m" / "a.safetensors", {"x.weight": ("BF16", (4, 4))})
    write(tmp_path / "m" / "b.safetensors", {"y.weight": ("BF16", (4, 4))})
    write(tmp_path / "m" / "stray.safetensors", {"z.weight": ("BF16", (4, 4))})
    index = {"weight_map": {"x.weight": "a.safetensors", "y.weight": "b.safetensors"}}
    (tmp_path / "m" / "model.safetensors.index.json").write_text(json.dumps(index))
    assert sorted(load_checkpoint(tmp_path / "m").tensors) == ["x.weight", "y.weight"]


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("header_too_long", "exceeds the file"),
        ("not_json", "not valid JSON"),
        ("offsets", "outside the"),
        ("dtype", "unknown dtype"),
    ],
)
def test_hostile_files_are_clear_errors(tmp_path: Path, breakage: str, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    if breakage == "header_too_long":
        write(path, {"w": ("F32", (2,))}, header_length=10**12)
    elif breakage == "not_json":
        path.write_bytes(struct.pack("<Q", 5) + b"{oops")
    else:
        header = {
            "w": {
                "dtype": "F32" if breakage == "offsets" else "Q9_WEIRD",
                "shape": [2],
                "data_offsets": [0, 10**9 if breakage == "offsets" else 8],
            }
        }
        raw = json.dumps(header).encode()
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(8))
    with pytest.raises(CheckpointError, match=message) as raised:
        read_header(path)
    assert "bad.safetensors" in str(raised.value)


def test_command_compares_two_checkpoints(tmp_path: Path) -> None:
    a = write(tmp_path / "A-FP8" / "model.safetensors", SCHEMES["fp8-block"][0]).parent
    b = write(tmp_path / "B-FP8" / "model.safetensors", SCHEMES["fp8-channel"][0]).parent
    result = run_main(["inspect-checkpoint", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert "both say FP8" in " ".join(result.output.split())
    missing = run_main(["inspect-checkpoint", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "does not exist" in " ".join(missing.output.split())


def test_hub_repositories_go_through_the_safetensors_metadata_api() -> None:
    from types import SimpleNamespace

    from ctxbench.audits.checkpoint import load_remote

    def fake(repo_id: str):  # the shape huggingface_hub returns
        assert repo_id == "org/Model-FP8"
        tensors = {
            "l.weight": SimpleNamespace(dtype="F8_E4M3", shape=[ROWS, COLS]),
            "l.weight_scale": SimpleNamespace(dtype="F32", shape=[]),
        }
        return SimpleNamespace(files_metadata={"model.safetensors": SimpleNamespace(tensors=tensors)})

    report = inspect(load_remote("org/Model-FP8", fake))
    assert report.scheme == "FP8 E4M3, per-tensor scales (F32)" and report.label == "fp8"
