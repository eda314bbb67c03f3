"""Build llama.cpp's `llama-server` (and `llama-quantize`) from the source vendored in the
MIT-licensed `llama-cpp-python` sdist, once per machine, into the cache keyed by version.

`GGML_NATIVE=OFF` matters: a native build crashed in the AMX path on this kind of machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import EngineBuildError
from .machine_cache import cache_root, pip_download

LLAMACPP_SDIST_VERSION = "0.3.36"
# llama.cpp's release number for a commit an sdist vendors, which the sdist cannot say (its submodule's git
# history is left out): llama-cpp-python 0.3.36 vendors ggml-org/llama.cpp@0c1e57098 (its CHANGELOG and the
# submodule's HEAD), llama.cpp's release b11312. A commit not here builds as b0-<commit>, still the real one.
LLAMACPP_RELEASES = {"0c1e57098bba43ac29e6e3b677cdceebdd22334f": 11312}
_COMMIT = re.compile(r"llama\.cpp@([0-9a-f]{7,40})")
TARGETS = ("llama-server", "llama-quantize")
_SKIPPED_TREES = ("docs", "models", "tests", ".git")
COMMON_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)
VARIANT_FLAGS = {
    "cpu": ("-DGGML_NATIVE=OFF",),
    "cuda": ("-DGGML_NATIVE=OFF", "-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"),
}
_PERCENT = re.compile(rb"^\[\s*(\d+)%\]")

Progress = Callable[[int, str], None]


@dataclass(frozen=True)
class LlamaCppBuild:
    """Where one build of llama.cpp lives in the cache."""

    variant: str = "cpu"
    version: str = LLAMACPP_SDIST_VERSION

    @property
    def root(self) -> Path:
        return cache_root() / "engines" / f"llamacpp-{self.version}-{self.variant}"

    @property
    def server(self) -> Path:
        return self.root / "bin" / "llama-server"

    @property
    def quantize(self) -> Path:
        return self.root / "bin" / "llama-quantize"

    def is_built(self) -> bool:
        """Both binaries are there, built by a ctxbench that recorded the llama.cpp version it built (an older
        build reported `b0-unknown` and is built again)."""
        if not (self.server.exists() and self.quantize.exists()):
            return False
        try:
            return "build_info" in json.loads((self.root / "build.json").read_text())
        except (OSError, ValueError):
            return False


def build_llamacpp(
    build: LlamaCppBuild,
    *,
    jobs: int | None = None,
    sdist: Path | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> LlamaCppBuild:
    """Build `llama-server` and `llama-quantize` unless the cache has them; return where they are.

    `progress(percent, line)` is called for each line CMake prints with a percentage.
    """
    if build.variant not in VARIANT_FLAGS:
        raise EngineBuildError(
            f"unknown llama.cpp variant {build.variant!r}; use one of {sorted(VARIANT_FLAGS)}"
        )
    if build.is_built() and not force:
        return build
    if sdist is None:
        sdist = pip_download(
            f"llama-cpp-python=={build.version}", f"llama_cpp_python-{build.version}.tar.gz", source_only=True
        )
    work = build.root.with_name(build.root.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    source = extract_llamacpp_source(sdist, work / "src")
    commit = sdist_llamacpp_commit(sdist)
    log_path = work / "build.log"
    started = time.perf_counter()
    cmake = _cmake()
    configure = [
        cmake,
        "-S",
        str(source),
        "-B",
        str(work / "build"),
        *COMMON_FLAGS,
        *VARIANT_FLAGS[build.variant],
        *version_flags(commit),
    ]
    compile_ = [
        cmake,
        "--build",
        str(work / "build"),
        "--target",
        *TARGETS,
        "-j",
        str(jobs or default_jobs()),
    ]
    with log_path.open("wb") as log:
        for command in (configure, compile_):
            log.write(("$ " + " ".join(command) + "\n").encode())
            _run_logged(command, log, progress, log_path)
    bin_dir = build.root / "bin"
    shutil.rmtree(build.root, ignore_errors=True)
    bin_dir.mkdir(parents=True)
    for target in TARGETS:
        shutil.copy2(work / "build" / "bin" / target, bin_dir / target)
    info = {
        "sdist": f"llama-cpp-python=={build.version}",
        "llamacpp_commit": commit,
        "build_info": build_info(commit),
        "variant": build.variant,
        "configure": configure[5:],
        "targets": list(TARGETS),
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    (build.root / "build.json").write_text(json.dumps(info, indent=2))
    shutil.copy2(log_path, build.root / "build.log")
    shutil.rmtree(work, ignore_errors=True)
    return build


def sdist_llamacpp_commit(sdist: Path) -> str | None:
    """The llama.cpp commit an sdist vendors: its submodule's `HEAD` where the sdist keeps it, else the commit
    its CHANGELOG's newest "update llama.cpp to ggml-org/llama.cpp@<commit>" names; None if neither says."""
    try:
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                if member.name.endswith(".git/modules/vendor/llama.cpp/HEAD"):
                    head = _text(archive, member).strip()
                    if re.fullmatch(r"[0-9a-f]{40}", head):
                        return head
            for member in archive.getmembers():
                if Path(member.name).name == "CHANGELOG.md" and len(Path(member.name).parts) == 2:
                    found = _COMMIT.search(_text(archive, member))
                    if found:
                        return found.group(1)
    except (tarfile.TarError, OSError, UnicodeDecodeError):
        return None
    return None


def _text(archive: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    handle = archive.extractfile(member)
    return "" if handle is None else handle.read().decode()


def build_info(commit: str | None) -> str:
    """What the built server reports as its version (`/props` `build_info`): b<release>-<commit>."""
    if commit is None:
        return "b0-unknown"
    release = next((n for full, n in LLAMACPP_RELEASES.items() if full.startswith(commit)), 0)
    return f"b{release}-{commit[:9]}"


def version_flags(commit: str | None) -> tuple[str, ...]:
    """The CMake definitions that make the server report `build_info(commit)` without a git checkout."""
    if commit is None:
        return ()
    release = build_info(commit).split("-", 1)[0][1:]
    return (f"-DLLAMA_BUILD_COMMIT={commit[:9]}", f"-DLLAMA_BUILD_NUMBER={release}")


def default_jobs() -> int:
    return os.cpu_count() or 2


def build_estimate_s(variant: str, jobs: int) -> float:
    """About how long a build takes with `jobs` parallel jobs, from builds measured: the CPU variant 383 s
    with 2 jobs (this repository's CI machine), CUDA for one architecture 213-366 s with 16 (H100, H200)."""
    core_seconds = {"cpu": 700.0, "cuda": 4500.0}.get(variant, 4500.0)
    return 30.0 + core_seconds / max(1, jobs)


def _cmake() -> str:
    """cmake from PATH, else the one pip installs into this environment (`pip install cmake`)."""
    found = shutil.which("cmake") or shutil.which("cmake", path=str(Path(sys.executable).parent))
    if found is None:
        raise EngineBuildError(
            "cmake is not installed: `pip install cmake` (or apt-get install cmake), then retry."
        )
    return found


def extract_llamacpp_source(sdist: Path, target: Path) -> Path:
    """Extract `vendor/llama.cpp` from the sdist without docs/, models/, tests/ and .git (~11 MB)."""
    try:
        with tarfile.open(sdist) as archive:
            members = []
            for member in archive.getmembers():
                parts = Path(member.name).parts
                if len(parts) < 3 or parts[1:3] != ("vendor", "llama.cpp"):
                    continue
                if len(parts) > 3 and parts[3] in _SKIPPED_TREES:
                    continue
                member.name = str(Path(*parts[3:])) if len(parts) > 3 else "."
                members.append(member)
            if not members:
                raise EngineBuildError(
                    f"{sdist} holds no vendor/llama.cpp; is it the llama-cpp-python sdist?"
                )
            archive.extractall(target, members=members, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise EngineBuildError(f"cannot read {sdist}: {exc}; delete it and run the build again.") from exc
    return target


def _run_logged(command: list[str], log: BinaryIO, progress: Progress | None, log_path: Path) -> None:
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError as exc:
        raise EngineBuildError(f"{command[0]} could not be started: {exc}") from exc
    assert process.stdout is not None
    for line in process.stdout:
        log.write(line)
        match = _PERCENT.match(line)
        if match and progress is not None:
            progress(int(match.group(1)), line.decode(errors="replace").strip())
    if process.wait() != 0:
        log.flush()
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
        raise EngineBuildError(
            f"`{' '.join(command)}` failed (exit {process.returncode}); log {log_path}:\n{tail}"
        )
