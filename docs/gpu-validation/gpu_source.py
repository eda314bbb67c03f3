"""Make what a lent GPU machine without internet needs to build llama.cpp's CUDA server and run
ctxbench: `.gpu/llama-cpp-slim.tar.gz` (the llama-cpp-python sdist that `ctxbench engine build` uses, without
what a CUDA build of llama-server never reads) and `.whl/` (the wheels the device image lacks). Run here,
where pip can reach PyPI, from the repository root:

    .venv/bin/python docs/gpu-validation/gpu_source.py          # then docs/gpu-validation/device.sh there

The slim tarball keeps the sdist's layout, its CHANGELOG and its submodule's HEAD, so the build on the device
records the llama.cpp version it built (b11312-0c1e57098 for 0.3.36), as a build from the full sdist does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
from pathlib import Path

from ctxbench.engines.build import LLAMACPP_SDIST_VERSION
from ctxbench.engines.machine_cache import pip_download

# Trees under vendor/llama.cpp a CUDA build of llama-server does not read (tests and examples are off in its
# CMake flags): 176 MB of the sdist's 190.
DROPPED = (
    "docs",
    "models",
    "tests",
    "benches",
    "media",
    "examples",
    "pocs",
    "gguf-py",
    "conversion",
    "ci",
    "skills",
    "tools/ui/src",
    "tools/ui/tests",
    *(
        f"ggml/src/ggml-{backend}"
        for backend in (
            "cann",
            "et",
            "hexagon",
            "metal",
            "musa",
            "opencl",
            "openvino",
            "rpc",
            "sycl",
            "virtgpu",
            "vulkan",
            "webgpu",
            "zdnn",
            "hip",
        )
    ),
)
KEPT_OUTSIDE = ("CHANGELOG.md", ".git/modules/vendor/llama.cpp/HEAD")
# What the device image (PyTorch, CUDA) lacked when ctxbench last ran there: pydantic and gguf, CPython 3.12.
WHEELS = (
    "pydantic==2.12.5",
    "pydantic-core==2.41.5",
    "annotated-types==0.7.0",
    "typing-inspection==0.4.2",
    "gguf==0.19.0",
)


def kept(name: str) -> bool:
    parts = Path(name).parts
    inside = "/".join(parts[1:])
    if inside in KEPT_OUTSIDE or len(parts) == 1:
        return True
    if parts[1:3] != ("vendor", "llama.cpp"):
        return inside == "vendor"
    tree = "/".join(parts[3:])
    return not any(tree == dropped or tree.startswith(dropped + "/") for dropped in DROPPED)


def slim(sdist: Path, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as source, tarfile.open(out, "w:gz") as target:
        for member in source.getmembers():
            if kept(member.name):
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sdist", type=Path, help="the llama-cpp-python sdist (default: ctxbench's download)"
    )
    parser.add_argument("--out", type=Path, default=Path(".gpu/llama-cpp-slim.tar.gz"))
    parser.add_argument("--wheels", type=Path, default=Path(".whl"))
    args = parser.parse_args()
    sdist = args.sdist or pip_download(
        f"llama-cpp-python=={LLAMACPP_SDIST_VERSION}",
        f"llama_cpp_python-{LLAMACPP_SDIST_VERSION}.tar.gz",
        source_only=True,
    )
    made = slim(sdist, args.out)
    mib = {path: f"{path.stat().st_size / 2**20:.1f} MiB" for path in (made, sdist)}
    print(f"{made}: {mib[made]} (from {sdist}, {mib[sdist]})")
    platforms = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", "3.12", "--implementation", "cp", "-d", str(args.wheels)]
    command += [flag for platform in platforms for flag in ("--platform", platform)]
    subprocess.run([*command, *WHEELS], check=True)
    print(f"{args.wheels}: {', '.join(sorted(p.name for p in args.wheels.glob('*.whl')))}")


if __name__ == "__main__":
    main()
