"""The one interface a check sends through, whatever is behind it (`ChatClient`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .client import Message
from .records import RequestRecord


class ChatClient(Protocol):
    """What a check sends its requests through: one `Client`, or a `Router` over a deployment's replicas
    (the same methods; a router adds a `replica` label and keeps a `conversation` on one replica)."""

    @property
    def model(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        request_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        enqueued_ns: int | None = None,
        conversation: str | None = None,
    ) -> RequestRecord: ...

    async def complete(
        self,
        prompt: str,
        *,
        max_tokens: int | None = None,
        request_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        enqueued_ns: int | None = None,
        conversation: str | None = None,
    ) -> RequestRecord: ...
