"""The many-users check's request labels. A closed-loop level's requests carry its `users`, the `user` and
the request's `index`; an open-loop rate's `mode = "open"`, the `rate`, the `arrival` process and the
`index`; both the prompts' `source` and `shared_prefix_tokens`, `warmup`, and a search's `repeat`. Recall
under load's carry `ask` (alone, loaded or load), `users`, and a question's number, depth and expected value
(or a loading user's `user` and `index`). Users run in processes add `client_process`; over Ray actors,
`client_actor`, `client_host` and `client_node` (`ClientLabels`)."""

from __future__ import annotations

from typing import Literal

from pydantic import field_serializer

from ...labels import LabelModel, Labels

OPEN = "open"


class ThroughputLabels(Labels):
    check: str = "throughput"
    mode: Literal["open"] | None = None
    rate: float | None = None
    arrival: str | None = None
    ask: Literal["alone", "loaded", "load"] | None = None
    users: int | None = None
    user: int | None = None
    question: int | None = None
    depth: float | None = None
    expected: str | None = None
    index: int | None = None
    repeat: int | None = None
    source: str | None = None
    shared_prefix_tokens: int | None = None

    @field_serializer("rate")
    def _rate(self, rate: float | None) -> str | None:
        return None if rate is None else f"{rate:g}"

    @field_serializer("depth")
    def _depth(self, depth: float | None) -> str | None:
        return None if depth is None else f"{depth:.3f}"


class ClientLabels(LabelModel):
    """Where a request's user ran, when not in the run's own process."""

    client_process: int | None = None
    client_actor: int | None = None
    client_host: str | None = None
    client_node: str | None = None
