"""The requests a late-binding router holds: one FIFO queue per client."""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Sequence
from dataclasses import dataclass

from sglang_fair.router.radix_index import Match


@dataclass(eq=False, slots=True)
class Held:
    """A request waiting in the router for a worker."""

    rid: str
    client: str
    tokens: Sequence[int]
    max_new: int
    seq: int  # arrival order, over every client
    match: Match  # the index's lookup when it arrived; refreshed before it is placed
    cost: float = 0.0  # what the router's fairness rule charges for it, fixed at arrival


class HeldQueues:
    """Held requests by client, each client's oldest first; clients in the order they last became backlogged."""

    def __init__(self) -> None:
        self._queues: dict[str, dict[str, Held]] = {}
        self._client_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._client_of)

    def __contains__(self, rid: str) -> bool:
        return rid in self._client_of

    def add(self, held: Held) -> None:
        if held.rid in self._client_of:
            raise ValueError(f"request id {held.rid!r} is already held")
        self._queues.setdefault(held.client, {})[held.rid] = held
        self._client_of[held.rid] = held.client

    def remove(self, rid: str) -> Held | None:
        """Take ``rid`` out, wherever it is in its client's queue; None if not held."""
        client = self._client_of.pop(rid, None)
        if client is None:
            return None
        queue = self._queues[client]
        held = queue.pop(rid)
        if not queue:
            del self._queues[client]
        return held

    def clients(self) -> KeysView[str]:
        """The clients with a request held."""
        return self._queues.keys()

    def head(self, client: str) -> Held:
        """``client``'s oldest held request (the client must have one)."""
        return next(iter(self._queues[client].values()))

    def count(self, client: str) -> int:
        return len(self._queues.get(client, ()))

    def __iter__(self) -> Iterator[Held]:
        for queue in self._queues.values():
            yield from queue.values()
