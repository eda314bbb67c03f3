"""What ctxbench's llama.cpp build records: the llama.cpp version the sdist vendors, and a time estimate that
follows the jobs it is given."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from ctxbench.engines.build import (
    LlamaCppBuild,
    build_estimate_s,
    build_info,
    sdist_llamacpp_commit,
    version_flags,
)

COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"


def sdist(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"llama_cpp_python-0.3.36/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_the_commit_comes_from_the_submodules_head_else_the_changelog(tmp_path: Path) -> None:
    changelog = "## [0.3.36]\n\n- feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098\n\n## [0.3.35]\n"
    full = sdist(
        tmp_path / "full.tar.gz",
        {".git/modules/vendor/llama.cpp/HEAD": COMMIT + "\n", "CHANGELOG.md": changelog},
    )
    assert sdist_llamacpp_commit(full) == COMMIT
    slim = sdist(tmp_path / "slim.tar.gz", {"CHANGELOG.md": changelog})  # a slimmed copy keeps no .git
    assert sdist_llamacpp_commit(slim) == "0c1e57098"
    assert sdist_llamacpp_commit(sdist(tmp_path / "bare.tar.gz", {"README.md": "x"})) is None


def test_the_server_reports_the_release_it_was_built_from() -> None:
    assert build_info(COMMIT) == build_info("0c1e57098") == "b11312-0c1e57098"
    assert build_info("1234567890abcdef") == "b0-123456789"  # a commit without a known release number
    assert build_info(None) == "b0-unknown" and version_flags(None) == ()
    assert version_flags(COMMIT) == ("-DLLAMA_BUILD_COMMIT=0c1e57098", "-DLLAMA_BUILD_NUMBER=11312")


def test_a_build_that_did_not_record_its_version_is_built_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CTXBENCH_CACHE", str(tmp_path))
    build = LlamaCppBuild()
    build.server.parent.mkdir(parents=True)
    build.server.write_text("")
    build.quantize.write_text("")
    (build.root / "build.json").write_text(json.dumps({"sdist": "llama-cpp-python==0.3.36"}))
    assert not build.is_built()
    (build.root / "build.json").write_text(json.dumps({"build_info": "b11312-0c1e57098"}))
    assert build.is_built()


def test_the_estimate_follows_the_jobs() -> None:
    # measured: the CPU build 383 s with 2 jobs; CUDA 213-366 s with 16
    assert 300 < build_estimate_s("cpu", 2) < 480 and build_estimate_s("cpu", 16) < 120
    assert 200 < build_estimate_s("cuda", 16) < 400 and build_estimate_s("cuda", 2) > 1200
