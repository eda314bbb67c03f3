"""Full garbage collections held off while requests stream: their pause would be stamped into arrivals."""

from __future__ import annotations

import gc


class NoFullCollections:
    """While any request is in flight, Python's full (oldest-generation) garbage collections wait.

    Measured (docs/performance.md): a full collection over the chunks of 64 streams stopped the event loop
    for 20-70 ms two seconds into a run, and every event that arrived meanwhile was stamped that late.
    Young collections still run, so short-lived cycles are still freed; the old threshold comes back when
    the last request ends."""

    def __init__(self) -> None:
        self._in_flight = 0
        self._saved: tuple[int, int, int] | None = None

    def __enter__(self) -> None:
        if self._in_flight == 0:
            self._saved = gc.get_threshold()
            gc.set_threshold(self._saved[0], self._saved[1], 1 << 30)
        self._in_flight += 1

    def __exit__(self, *exc_info: object) -> None:
        self._in_flight -= 1
        if self._in_flight == 0 and self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None


NO_FULL_COLLECTIONS = NoFullCollections()  # one for the process: gc thresholds are global
