"""Many users as an open loop: requests arrive at a rate whatever the server does, swept until it saturates.

At each rate (lowest first) `requests_at(rate)` requests are due at a constant or Poisson pattern (seeded),
sent by the shared open loop (`checks/open_loop.py`). A rate is saturated when each request's lag behind its
due time grows over the run (`arrivals.lag_growth`); the sweep stops after the first saturated rate, and a
rate where the client itself fell behind says so. Each finished rate is a unit a resumed run skips.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ...client.chat import ChatClient
from ...config.load_params import ThroughputParams
from ...measure import metrics
from ...measure.arrivals import behind_threshold_s, due_times, open_loop
from ...records import RequestRecord
from ...store.run_dir import RunDir
from ...text.haystack import request_seed
from ..open_loop import Due, send_when_due
from ..prompts import PromptMaker
from .labels import OPEN, ThroughputLabels


def rate_unit(rate: float, repeat: int = 0) -> str:
    return f"throughput-r{rate:g}" + (f"-rep{repeat}" if repeat else "")


async def run_rate(
    client: ChatClient,
    prompts: PromptMaker,
    params: ThroughputParams,
    run: RunDir,
    scope: tuple[str, ...],
    rate: float,
    extra_body: dict[str, object],
    on_request: Callable[[RequestRecord], None] | None = None,
    repeat: int = 0,
    first: int = 0,
    count: int | None = None,
) -> list[RequestRecord]:
    """Offer `rate` requests a second. `prompts(seed, index)` gives a request's messages and planned tokens
    (the many-users check's `PromptMaker`); all are built before the first is due. A search's repeat of the
    rate (`repeat` > 0) has its own arrivals, prompts and request ids. A later round of a rate the SLO has not
    decided (`check._Levels`) offers `count` more, numbered on from `first`, on arrivals of its own."""
    count = params.requests_at(rate) if count is None else count
    again = (repeat,) if repeat else ()
    later = (first,) if first else ()
    due = due_times(rate, count, params.arrival, request_seed(*scope, "arrivals", rate, *again, *later))

    def build() -> list[Due]:
        requests = []
        for k, at_s in enumerate(due, start=first):
            messages, planned = prompts(request_seed(*scope, "open-loop", rate, k, *again), 1_000_000 + k)
            labels = ThroughputLabels(
                mode=OPEN,
                rate=rate,
                arrival=params.arrival,
                index=k,
                repeat=repeat or None,
                source=params.source,
                shared_prefix_tokens=params.shared_prefix_tokens,
                planned_tokens=planned,
            ).written()
            request_id = run.request_id(f"tput-r{rate:g}" + (f"-rep{repeat}" if repeat else "") + f"-{k}")
            requests.append(Due(at_s, messages, params.output_tokens, request_id, labels, prompts.intent))
        return requests

    return await send_when_due(client, run, await asyncio.to_thread(build), extra_body, on_request)


def rate_summary(
    records: list[RequestRecord], params: ThroughputParams, rate: float, attempt: int
) -> dict[str, Any]:
    """The closed-loop figures (`metrics.throughput`) over the rate's records, with the open-loop verdict."""
    figures = metrics.throughput(records, params.ttft_slo_s, params.tpot_slo_s)
    verdict = open_loop(
        records, rate, saturation_lag_growth=params.saturation_lag_growth, behind_s=behind_threshold_s(rate)
    )
    return {
        **asdict(figures),
        **asdict(verdict),
        "behind_threshold_s": behind_threshold_s(rate),
        "attempt": attempt,
        "request_ids": [r.request_id for r in records],
    }
