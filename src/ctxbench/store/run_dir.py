"""The results layout on disk, written as the run goes.

`results/runs/<run_id>/`: `manifest.json` (replaced atomically: write, then rename),
`requests.jsonl` (one raw record a line, appended and flushed as each request ends, fsynced by a
background thread right after), the server log, `/metrics` snapshots and the run's report. An interrupted
run keeps every line written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ..records import RequestRecord
from .run_files import MANIFEST_FILE, Manifest

MANIFEST_VERSION = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# a record's line as `model_dump_json` writes it: its version, then its id
_REQUEST_ID = re.compile(r'^\{"record_version":\d+,"request_id":"((?:[^"\\]|\\.)*)"', re.MULTILINE)


class DuplicateRequestId(RuntimeError):
    """A second record with a request id already in the run: one request id is one request (a bug in the
    check that sent it, never a user's error: a check that sends a prompt again must give it a new id)."""


class _Syncer:
    """fsyncs appended files in one background thread, many appends to one file in one pass (group commit).

    Measured (docs/performance.md): appending a 300-chunk record with open + write + fsync took 2.3 ms, on the
    event loop; when a thousand streams end within a second, that held the loop for seconds and every byte
    that arrived meanwhile was read late. Written and flushed on the loop, a record is safe from the process
    being killed at once; the fsync that guards it from a machine crash follows within milliseconds. The
    syncer owns the handles it is given: it fsyncs the newest one of each file and closes them all."""

    def __init__(self) -> None:
        self._pending: dict[str, list[IO[str]]] = {}
        self._busy = False
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None

    def hand_over(self, handle: IO[str]) -> None:
        with self._condition:
            self._pending.setdefault(handle.name, []).append(handle)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ctxbench-fsync", daemon=True)
                self._thread.start()
            self._condition.notify_all()

    def _run(self) -> None:
        while True:
            with self._condition:
                if not self._pending:  # idle: the next record starts a new thread
                    self._thread = None
                    self._busy = False
                    self._condition.notify_all()
                    return
                batch, self._pending = self._pending, {}
                self._busy = True
            for handles in batch.values():
                try:
                    os.fsync(handles[-1].fileno())  # the file's data, whichever handle wrote it
                except OSError:
                    pass
                for handle in handles:
                    handle.close()

    def wait(self) -> None:
        """Until every handle handed over so far is fsynced and closed (where a run ends)."""
        with self._condition:
            while self._pending or self._busy:
                self._condition.wait()


def safe_name(name: str, max_length: int = 80) -> str:
    """A file-name-safe form of any deployment or check name (`a/b c:1` -> `a-b-c-1`)."""
    cleaned = _UNSAFE.sub("-", name).strip("-.")
    return cleaned[:max_length] or "unnamed"


def new_run_id(*parts: str) -> str:
    """`<UTC timestamp>-<parts...>`: sortable by start time and safe as a directory name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return "-".join([stamp, *(safe_name(p) for p in parts if p)])


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(path)


def attempt_of(request_id: str) -> int:
    """The attempt a request id belongs to: `...-a2` is attempt 2, anything else attempt 1."""
    head, sep, tail = request_id.rpartition("-a")
    return int(tail) if sep and tail.isdigit() else 1


def git_revision(package: Path | None = None) -> str | None:
    """The commit of ctxbench's own repository, or None ("unknown"). Only the repository whose root holds
    this package (`src/ctxbench`'s grandparent, with its own `.git`) is asked: git run from the package
    folder would climb to any enclosing repository, and a copy of the source inside another project (or an
    installed wheel) would record that project's commit. A tracked file changed since that commit adds
    `-dirty` (as `git describe --dirty` does): the code that ran was not the commit's."""
    root = (package or Path(__file__).resolve().parents[1]).parent.parent
    if not (root / ".git").exists():
        return None
    try:
        git = ["git", "-C", str(root)]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        changed = subprocess.run([*git, "diff", "--quiet", "HEAD", "--"], capture_output=True)
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if changed.returncode == 1 else "")


_PARSED: dict[tuple[str, int, int], tuple[RequestRecord, ...]] = {}
_PARSED_FILES = 4
_PARSED_BYTES = 64 << 20


def _parse(text: str) -> Iterator[RequestRecord]:
    for line in text.splitlines():
        if line.strip():
            try:
                yield RequestRecord.model_validate_json(line)
            except ValueError:
                continue


class RunDir:
    """One run's directory. Create it with `RunDir.create(results, run_id)`.

    `attempt` counts how many times a suite started on this directory: a resumed run is attempt 2 and
    its request ids end in `-a2`, so records of an interrupted attempt are kept and never confused
    with the ones that replace them.
    """

    def __init__(self, path: Path, attempt: int = 1) -> None:
        self.path = path
        self.attempt = attempt
        self._syncer: _Syncer | None = None  # its thread starts with the first record
        self._ids: set[str] | None = None  # request ids on disk, read at the first append
        # Called with each unit marked finished, after it is on disk (a mirrored run sends it on at once).
        self.on_completed: Callable[[str], None] | None = None

    @classmethod
    def create(cls, results: Path, run_id: str) -> RunDir:
        """A new, empty run directory; a second run with the same id in the same second gets `-2`, `-3`..."""
        (results / "runs").mkdir(parents=True, exist_ok=True)
        for n in range(1, 1000):
            path = results / "runs" / (run_id if n == 1 else f"{run_id}-{n}")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise FileExistsError(f"{results / 'runs'}: too many runs named {run_id}")

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def requests_path(self) -> Path:
        return self.path / "requests.jsonl"

    def request_id(self, base: str) -> str:
        """`base` on the first attempt, `base-a<N>` on the N-th."""
        return base if self.attempt == 1 else f"{base}-a{self.attempt}"

    def completed_units(self) -> set[str]:
        """Units of work (a check, a ramp users setting) that finished on some attempt."""
        path = self.path / "units.jsonl"
        if not path.exists():
            return set()
        units = set()
        for line in path.read_text().splitlines():
            try:
                units.add(json.loads(line)["unit"])
            except (ValueError, KeyError):
                continue
        return units

    def mark_completed(self, unit: str) -> None:
        """Record that `unit` finished (appended and flushed: a resumed run skips it)."""
        with (self.path / "units.jsonl").open("a") as handle:
            handle.write(
                json.dumps(
                    {
                        "unit": unit,
                        "attempt": self.attempt,
                        "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                )
                + "\n"
            )
            handle.flush()
            os.fsync(handle.fileno())
        if self.on_completed is not None:
            self.on_completed(unit)

    def append(self, record: RequestRecord) -> None:
        """Append one record: written and flushed before it returns (a killed process loses nothing), fsynced
        by a background thread right after (the event loop does not wait for the disk).

        Raises `DuplicateRequestId` for an id already written (by this process or, when the first append read
        the file, another): a resumed attempt's ids end in `-a<N>`, so an id seen twice is one sent twice."""
        if self._ids is None:
            text = self.requests_path.read_text() if self.requests_path.exists() else ""
            self._ids = {match.group(1) for match in _REQUEST_ID.finditer(text)}
        if record.request_id in self._ids:
            raise DuplicateRequestId(
                f"{self.requests_path}: request id {record.request_id!r} was already recorded in this run: "
                "one request id is one request (a check sent it twice; this is a bug in ctxbench)"
            )
        self._ids.add(record.request_id)
        handle = self.requests_path.open("a")
        handle.write(record.model_dump_json() + "\n")
        handle.flush()
        self._syncer = self._syncer or _Syncer()
        self._syncer.hand_over(handle)

    def sync(self) -> None:
        """Wait until every record appended so far is on disk (fsynced)."""
        if self._syncer is not None:
            self._syncer.wait()

    def records(self) -> Iterator[RequestRecord]:
        """Every complete record written so far (a torn last line from a crash is skipped). A report reads a
        run's records a dozen times (evidence, glance, sections, audit, exports): the parsed records of the
        last few files (up to 64 MiB each) are kept while the file is unchanged (size, modification time)."""
        try:
            stat = self.requests_path.stat()
        except FileNotFoundError:
            return
        if stat.st_size > _PARSED_BYTES:  # a file this large is streamed, never held
            yield from _parse(self.requests_path.read_text())
            return
        key = (str(self.requests_path.resolve()), stat.st_size, stat.st_mtime_ns)
        parsed = _PARSED.pop(key, None)
        if parsed is None:
            parsed = tuple(_parse(self.requests_path.read_text()))
        _PARSED[key] = parsed  # the most recent last
        while len(_PARSED) > _PARSED_FILES:
            del _PARSED[next(iter(_PARSED))]
        yield from parsed

    def manifest(self) -> Manifest:
        """The run's manifest, as every reader sees it (run_files.Manifest)."""
        return Manifest.load(self.path)

    def died_during(self) -> str | None:
        """The check the engine died in, where it did (`failed.during` in the manifest): that check's result
        file says nothing of its claim."""
        failed = self.manifest().failed
        return failed.during if failed else None

    def write_manifest(self, manifest: Manifest | dict[str, Any]) -> None:
        """Save the run's manifest through its model (a mapping is validated as one first), versioned."""
        model = manifest if isinstance(manifest, Manifest) else Manifest.model_validate(manifest)
        write_json_atomic(
            self.path / MANIFEST_FILE, {**model.model_dump(mode="json"), "manifest_version": MANIFEST_VERSION}
        )

    def write_metrics_snapshot(self, label: str, samples: dict[str, float]) -> None:
        write_json_atomic(self.path / f"metrics-{safe_name(label)}.json", samples)

    def append_metrics(
        self,
        check: str,
        phase: str,
        per_replica: list[dict[str, float]],
        common: Callable[[dict[str, float]], dict[str, float]],
    ) -> None:
        """One line of `metrics.jsonl`: each replica's `/metrics` as scraped and under the common names that
        `common` gives it (the engine's: `engines.prom.common_metrics`)."""
        line = {
            "check": check,
            "phase": phase,
            "attempt": self.attempt,
            "at_ns": time.perf_counter_ns(),
            "replicas": [{"common": common(samples), "samples": samples} for samples in per_replica],
        }
        with (self.path / "metrics.jsonl").open("a") as handle:
            handle.write(json.dumps(line) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
