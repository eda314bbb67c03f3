"""`trace.json`, the trace-replay check's summary (check.py): load figures, the client's lateness, and the
cached tokens the trace's shared blocks imply against those the server reported. One model, written by the
check and read by the report, the evidence cell and the console; files from any earlier run load."""

from __future__ import annotations

from typing import Any, ClassVar

from ...store.check_files import CheckFile, Stats


class TraceFile(CheckFile):
    """A replayed trace: load figures, the client's lateness, and cached tokens implied against reported."""

    FILE: ClassVar[str] = "trace.json"
    spec: dict[str, Any] = {}
    requests: int
    failed: int
    requests_per_s: float | None
    output_tokens_per_s: float | None
    ttft_s: Stats
    tpot_s: Stats
    lateness_p50_s: float | None
    lateness_p99_s: float | None
    lag_growth: float | None
    expected_cached_tokens: int
    reported_cached_tokens: int | None  # None: the server reported no cached tokens
    sharing_requests: int
    sharing_served: int | None  # None: the server reported no cached tokens
    # trace lines shorter than the shortest prompt ctxbench builds, sent at that length (None: older runs)
    lengthened_requests: int | None = None

    @property
    def cached_share(self) -> float | None:
        """Reported over implied cached tokens (None where not reported or none implied)."""
        reported, expected = self.reported_cached_tokens, self.expected_cached_tokens
        return reported / expected if reported is not None and expected else None
