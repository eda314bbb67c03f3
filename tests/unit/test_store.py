"""The results store: safe names, appended records, atomic manifests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ctxbench.records import RequestRecord
from ctxbench.store.run_dir import RunDir, git_revision, new_run_id, safe_name
from ctxbench.store.run_files import Manifest


def a_record(request_id: str) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        endpoint="chat",
        url="http://127.0.0.1:1/x",
        model="m",
        request_bytes=1,
        enqueued_ns=0,
        sent_ns=1,
        end_ns=2,
    )


def test_names_become_safe_file_names() -> None:
    assert safe_name("deepseek-ai/DeepSeek V4:fp8") == "deepseek-ai-DeepSeek-V4-fp8"
    assert safe_name("../../etc") == "etc"
    assert safe_name("///") == "unnamed"
    run_id = new_run_id("a b", "c/d")
    assert "/" not in run_id and " " not in run_id and run_id.endswith("-a-b-c-d")


def test_records_round_trip_and_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "run-1")
    run.append(a_record("one"))
    run.append(a_record("two"))
    with run.requests_path.open("a") as handle:
        handle.write('{"request_id": "thr')  # a crash mid-write
    assert [r.request_id for r in run.records()] == ["one", "two"]
    assert list(run.records())[0] == a_record("one")


def test_records_are_parsed_once_while_the_file_is_unchanged(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "run-1")
    run.append(a_record("one"))
    first, again = list(run.records()), list(RunDir(run.path).records())
    assert again[0] is first[0]  # a second reader, even through another RunDir, gets the parsed records
    run.append(a_record("two"))  # the file grew: read again, the new record included
    assert [r.request_id for r in run.records()] == ["one", "two"]
    run.requests_path.write_text(a_record("new").model_dump_json() + "\n")  # rewritten: its own records
    assert [r.request_id for r in run.records()] == ["new"]


def test_manifest_is_replaced_whole(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "run-1")
    run.write_manifest({"started_at": "t0"})
    run.write_manifest({"started_at": "t0", "ended_at": "t1"})
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert (manifest["manifest_version"], manifest["started_at"], manifest["ended_at"]) == (1, "t0", "t1")
    assert Manifest.model_validate(manifest) == run.manifest()  # saved through its model, every field
    assert not list(run.path.glob("*.partial"))


def test_secrets_never_reach_a_manifest() -> None:
    from ctxbench.config.redaction import redact_command, redact_env

    command = ["llama-server", "--api-key", "sk-live-123", "--hf-token=hf_abc", "--port", "8080"]
    assert redact_command(command) == [
        "llama-server",
        "--api-key",
        "<redacted>",
        "--hf-token=<redacted>",
        "--port",
        "8080",
    ]
    assert redact_env({"HF_TOKEN": "hf_abc", "OPENAI_API_KEY": "sk", "CUDA_VISIBLE_DEVICES": "0"}) == {
        "HF_TOKEN": "<redacted>",
        "OPENAI_API_KEY": "<redacted>",
        "CUDA_VISIBLE_DEVICES": "0",
    }


def test_appends_are_flushed_at_once_and_fsynced_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import subprocess
    import sys
    import threading

    from ctxbench.store import run_dir as store

    synced: list[tuple[int, str]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append((fd, threading.current_thread().name))
        real_fsync(fd)

    monkeypatch.setattr(store.os, "fsync", fsync)
    run = RunDir.create(tmp_path, "run-1")
    run.append(a_record("one"))
    run.append(a_record("two"))
    # Flushed: another process sees both lines at once, whatever the fsync thread has done yet.
    seen = subprocess.run(
        [sys.executable, "-c", f"print(open({str(run.requests_path)!r}).read().count(chr(10)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert seen.stdout.strip() == "2"
    run.sync()
    assert synced and all(name == "ctxbench-fsync" for _, name in synced)


def _git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def test_the_revision_is_ctxbenchs_own_never_an_enclosing_repositorys(tmp_path: Path) -> None:
    # Seen on a device copy: the source folder had no .git of its own, and `git rev-parse` from the package
    # climbed to the enclosing repository and recorded its commit.
    outer = tmp_path / "other-project"
    package = outer / "vendor" / "ctxbench" / "src" / "ctxbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    _git(outer, "init", "-q")
    _git(outer, "add", ".")
    _git(outer, "commit", "-qm", "other")
    assert git_revision(package) is None
    own = outer / "vendor" / "ctxbench"
    _git(own, "init", "-q")
    _git(own, "add", ".")
    _git(own, "commit", "-qm", "ctxbench")
    assert git_revision(package) == _git(own, "rev-parse", "HEAD") != _git(outer, "rev-parse", "HEAD")
    # a copy whose files differ from its commit (a device copy of a working tree) says so
    (package / "__init__.py").write_text("changed = True\n")
    assert git_revision(package) == _git(own, "rev-parse", "HEAD") + "-dirty"
    checkout = Path(__file__).parents[2]
    if (checkout / ".git").exists():
        assert (git_revision() or "").removesuffix("-dirty") == _git(checkout, "rev-parse", "HEAD")
