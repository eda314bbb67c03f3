"""Client-side routing over replicas of one deployment.

A conversation sticks to the replica that served its first turn (its prefix cache is there); a new
conversation, or a request that names none, goes to the replica with the fewest requests in flight
(ties: the one that has taken the fewest conversations, then the lowest index). Each record carries
the replica in its `replica` label, so per-replica load can be read back from the records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..labels import RouterLabels
from ..records import RequestRecord
from .stream import Client, Message


class Router:
    """Sends each request to one of `clients` (one per replica); the same methods as `Client`."""

    def __init__(self, clients: Sequence[Client]) -> None:
        if not clients:
            raise ValueError("a Router needs at least one replica")
        self.clients = list(clients)
        self.in_flight = [0] * len(clients)
        self.conversations_taken = [0] * len(clients)
        self._sticky: dict[str, int] = {}

    @property
    def model(self) -> str:
        return self.clients[0].model

    @property
    def base_url(self) -> str:
        return self.clients[0].base_url

    def pick(self, conversation: str | None) -> int:
        """The replica for a request of `conversation` (None: a one-off request)."""
        if conversation is not None and conversation in self._sticky:
            return self._sticky[conversation]
        replica = min(
            range(len(self.clients)), key=lambda i: (self.in_flight[i], self.conversations_taken[i], i)
        )
        if conversation is not None:
            self._sticky[conversation] = replica
        self.conversations_taken[replica] += 1
        return replica

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        conversation: str | None = None,
        labels: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> RequestRecord:
        return await self._send("chat", messages, conversation, labels, kwargs)

    async def complete(
        self,
        prompt: str,
        *,
        conversation: str | None = None,
        labels: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> RequestRecord:
        return await self._send("complete", prompt, conversation, labels, kwargs)

    async def _send(
        self,
        method: str,
        content: Any,
        conversation: str | None,
        labels: Mapping[str, str] | None,
        kwargs: dict[str, Any],
    ) -> RequestRecord:
        replica = self.pick(conversation)
        self.in_flight[replica] += 1
        try:
            send = getattr(self.clients[replica], method)
            tagged = {**(labels or {}), **RouterLabels(replica=replica).written()}
            return await send(content, labels=tagged, **kwargs)
        finally:
            self.in_flight[replica] -= 1

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
