"""The event loop the client runs on: uvloop's where it is installed (a Linux dependency), else asyncio's.

Measured with `benchmarks/client_speed.py` on 2 cores (docs/performance.md, "The event loop"): with uvloop
ctxbench's p99 receive error at 256 streams in one process fell from 9-21 ms to 0.02-2.6 ms, and at 1,024
from 51-100 ms to 38-44 ms. `CTXBENCH_LOOP=asyncio` keeps asyncio's own loop (to compare, or where uvloop
misbehaves); the manifest records which one ran (`event_loop`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def name() -> str:
    """ "uvloop" or "asyncio": the loop `run` uses here."""
    if os.environ.get("CTXBENCH_LOOP", "").strip().lower() == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the chosen loop."""
    if name() == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
