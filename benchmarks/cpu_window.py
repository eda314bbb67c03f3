"""A client's CPU while the reference server was streaming to it, whatever the client is made of.

`run_measured(command)` runs a tool and samples the CPU time (user + system) of its whole process tree
from `/proc` every `period_s`, stamped with `perf_counter_ns` (the clock the reference server writes in its
`--log`). `cpu_between(samples, start_ns, end_ns)` interpolates the tree's CPU seconds over the server's
busy window (first request arrival -> last event sent), so the start-up of a tool (imports, tokenizer
loading, worker processes) does not count: what is left is the cost of consuming the stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from time import perf_counter_ns, sleep

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of one process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), (int(fields[11]) + int(fields[12])) * _TICK_S


class TreeCpu(threading.Thread):
    """Samples the CPU seconds of `pid` and all its descendants (exited ones keep their last value)."""

    def __init__(self, pid: int, period_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root = pid
        self.period_s = period_s
        self.samples: list[tuple[int, float]] = []
        self._last: dict[int, float] = {}
        self._done = threading.Event()

    def _tree(self) -> set[int]:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                stat = _stat(int(entry))
                if stat is not None:
                    parents[int(entry)] = stat[0]
        tree, grew = {self.root}, True
        while grew:
            more = {pid for pid, parent in parents.items() if parent in tree} - tree
            tree |= more
            grew = bool(more)
        return tree

    def run(self) -> None:
        tree: set[int] = {self.root}
        rounds = 0
        while not self._done.is_set():
            if rounds % 10 == 0:  # new worker processes are found every 10 samples
                tree |= self._tree()
            for pid in tree:
                stat = _stat(pid)
                if stat is not None:
                    self._last[pid] = stat[1]
            self.samples.append((perf_counter_ns(), sum(self._last.values())))
            rounds += 1
            sleep(self.period_s)

    def stop(self) -> None:
        self._done.set()
        self.join()


def run_measured(command: list[str], **kwargs: object) -> tuple[subprocess.CompletedProcess[str], TreeCpu]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)  # type: ignore[call-overload]
    sampler = TreeCpu(process.pid)
    sampler.start()
    stdout, stderr = process.communicate()
    sampler.stop()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), sampler


def cpu_between(samples: list[tuple[int, float]], start_ns: int, end_ns: int) -> float:
    """CPU seconds spent between two instants, linearly interpolated between samples."""

    def at(t_ns: int) -> float:
        before = [s for s in samples if s[0] <= t_ns]
        after = [s for s in samples if s[0] >= t_ns]
        if not before:
            return samples[0][1]
        if not after:
            return samples[-1][1]
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (t_ns - t0) / (t1 - t0)

    return at(end_ns) - at(start_ns)


def server_window(log: Path, offset: int) -> tuple[int, int, int, int]:
    """(first arrival, last event sent, events, new offset) from the server's log lines after `offset`."""
    with log.open() as file:
        file.seek(offset)
        lines = [json.loads(line) for line in file.read().splitlines() if line.strip()]
        end = file.tell()
    if not lines:
        return 0, 0, 0, end
    return (
        min(r["arrival_ns"] for r in lines),
        max(r["last_sent_ns"] for r in lines),
        sum(r["events"] for r in lines),
        end,
    )
