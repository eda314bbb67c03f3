"""The one interface a check sends through, whatever is behind it (`ChatClient`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Unpack

from ..records import RequestRecord
from .stream import Message, SendOptions


class ChatClient(Protocol):
    """What a check sends its requests through: one `Client`, or a `Router` over a deployment's replicas
    (the same methods; a router adds a `replica` label and keeps a `conversation` on one replica)."""

    @property
    def model(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    async def chat(
        self, messages: Sequence[Message], *, conversation: str | None = None, **options: Unpack[SendOptions]
    ) -> RequestRecord: ...

    async def complete(
        self, prompt: str, *, conversation: str | None = None, **options: Unpack[SendOptions]
    ) -> RequestRecord: ...
