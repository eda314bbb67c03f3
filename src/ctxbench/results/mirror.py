"""A run directory written on one machine and mirrored, as it is written, into a results directory on another.

A deployment that runs as a Ray task on some node writes its run directory on that node's disk, as it would
at home; `Tail` sends what changed to the driver's `Mirror` (a Ray actor on the driver's node; both classes
here are plain, distributed.py makes the actor). Files that only grow (records, units, telemetry, logs) go
as the bytes past what was sent, at their offset (a repeated send writes the same bytes again); any other
file goes whole when its size or time changes, written atomically. `units.jsonl` goes last (as long as it
was when the flush began, so a unit finished meanwhile waits for its files), and again the moment a unit is
marked finished: when the driver holds a finished unit it holds what the unit measured, so
a node lost afterwards loses nothing finished and the campaign resumes from the driver's copy.

A table the whole campaign shares (`ramp1m.csv`) goes as its new rows, appended under the driver's header.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

GROWING = (".jsonl", ".log")
LAST = "units.jsonl"
TABLES = ("ramp1m.csv",)


class Mirror:
    """The driver's side: writes what tails send under `results` (its only writer there)."""

    def __init__(self, results: str) -> None:
        self.results = Path(results).resolve()
        self.nodes: dict[str, str] = {}  # a deployment's key (state_key) -> the node its task runs on

    def placed(self, key: str, node: str) -> None:
        """A deployment's task started on `node` (the driver watches that node while it waits)."""
        self.nodes[key] = node

    def placements(self) -> dict[str, str]:
        return dict(self.nodes)

    def _path(self, relative: str) -> Path:
        path = (self.results / relative).resolve()
        if self.results not in path.parents:
            raise ValueError(f"{relative!r} is outside the results directory {self.results}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write(self, relative: str, offset: int, data: bytes) -> None:
        """The bytes of a growing file from `offset` on (what was there past it is replaced)."""
        path = self._path(relative)
        with path.open("r+b" if path.exists() else "wb") as handle:
            handle.truncate(offset)
            handle.seek(offset)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def replace(self, relative: str, data: bytes) -> None:
        """A whole file, atomically (a reader sees the old one or the new one)."""
        path = self._path(relative)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, path)

    def append(self, relative: str, data: bytes, header: bytes = b"") -> None:
        """Lines at the end of a file shared by every run (`header` first when the file is new)."""
        path = self._path(relative)
        with path.open("ab") as handle:
            if handle.tell() == 0:
                handle.write(header)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def files(self, run_id: str) -> dict[str, bytes]:
        """A run directory's files, for a node to resume that run from."""
        run = self._path(f"runs/{run_id}")
        return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


Send = Callable[[str, tuple[object, ...]], None]  # (Mirror method name, its arguments)


class Tail:
    """The node's side: sends what changed under `local` (a results directory of one run) to a mirror,
    every `interval_s` from a thread and whenever `flush` is called."""

    def __init__(self, local: Path, send: Send, interval_s: float = 1.0) -> None:
        self.local = local
        self.send = send
        self.interval_s = interval_s
        self._sent: dict[Path, int] = {}  # growing files: bytes sent
        self._seen: dict[Path, tuple[int, int]] = {}  # other files: (size, mtime_ns) sent
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ctxbench-tail", daemon=True)

    def already_sent(self) -> None:
        """What is under `local` now came from the mirror (a resumed run): send only what changes next."""
        for path in self.local.rglob("*"):
            if path.is_file():
                stat = path.stat()
                self._sent[path] = stat.st_size
                self._seen[path] = (stat.st_size, stat.st_mtime_ns)
        for name in TABLES:
            table = self.local / name
            if table.exists():
                self._sent[table] = table.stat().st_size

    def start(self) -> Tail:
        self._thread.start()
        return self

    def stop(self) -> None:
        """A last flush, then the thread ends."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.flush()

    def flush(self, _unit: str = "") -> None:
        """Send everything that changed; `units.jsonl` after the rest, and only as long as it was before the
        rest was listed: a unit's line is written after its files, so every unit sent has its files listed
        and sent before it (the check goes on writing while a flush runs)."""
        with self._lock:
            runs = self.local / "runs"
            units = {p: p.stat().st_size for p in runs.glob(f"*/{LAST}")} if runs.exists() else {}
            files = sorted(p for p in runs.rglob("*") if p.is_file()) if runs.exists() else []
            for path in files:
                if path.name != LAST and not path.name.endswith(".partial"):
                    self._send_file(path, str(path.relative_to(self.local)))
            for name in TABLES:
                self._send_rows(self.local / name, name)
            for path, size in sorted(units.items()):
                self._send_file(path, str(path.relative_to(self.local)), size)

    def _send_file(self, path: Path, relative: str, upto: int | None = None) -> None:
        """A file's change; a growing one's bytes up to `upto` (default: all there are now)."""
        try:
            stat = path.stat()
        except FileNotFoundError:  # replaced between the listing and now: the next flush sends it
            return
        if path.name.endswith(GROWING):
            sent = self._sent.get(path, 0)
            size = stat.st_size if upto is None else min(upto, stat.st_size)
            if size > sent:
                with path.open("rb") as handle:
                    handle.seek(sent)
                    data = handle.read(size - sent)
                self.send("write", (relative, sent, data))
                self._sent[path] = sent + len(data)
        elif self._seen.get(path) != (stat.st_size, stat.st_mtime_ns):
            self.send("replace", (relative, path.read_bytes()))
            self._seen[path] = (stat.st_size, stat.st_mtime_ns)

    def _send_rows(self, table: Path, relative: str) -> None:
        if not table.exists():
            return
        text = table.read_bytes()
        header_end = text.find(b"\n") + 1
        sent = max(self._sent.get(table, 0), header_end)
        complete = text.rfind(b"\n") + 1  # whole rows only: a row being written goes next time
        if complete > sent:
            self.send("append", (relative, text[sent:complete], text[:header_end]))
            self._sent[table] = complete
