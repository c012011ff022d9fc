"""Virtual Token Counter (VTC paper, Algorithm 2).

Each client has a counter of the service it received. Admission repeatedly
takes the earliest request of the queued client with the smallest counter;
admission and every generated token raise the counter. When a client with no
queued request sends one, its counter is lifted to the smallest counter among
queued clients (lines 12-13), or, if the queue is empty, to the counter of the
last client that left it (lines 8-10), so unused credit never carries over.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from sglang_fair.core.policies.base import Policy
from sglang_fair.core.requests import RequestState, TrackedRequest


class VTCPolicy(Policy):
    name = "vtc"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.counters: dict[str, float] = {}
        # The last client whose queue emptied (Algorithm 2, line 9). Its counter
        # is read when needed (it keeps growing while its requests decode); the
        # value is kept if that client is forgotten.
        self._last_left: str | None = None
        self._last_left_counter = 0.0

    def on_enqueue(self, client: str, first_in_queue: bool) -> None:
        own = self.counters.get(client, 0.0)
        if first_in_queue:
            queued = [self.counters.get(c, 0.0) for c, a in self.activity.items() if a.queued > 0 and c != client]
            floor = min(queued) if queued else self.counters.get(self._last_left, self._last_left_counter)
            own = max(own, floor)
        self.counters[client] = own

    def on_queue_left(self, client: str) -> None:
        self._last_left = client

    def charge(self, client: str, amount: float) -> None:
        self.counters[client] = self.counters.get(client, 0.0) + amount

    def counter(self, client: str) -> float | None:
        return self.counters.get(client)

    def forget(self, client: str) -> None:
        value = self.counters.pop(client, None)
        if client == self._last_left and value is not None:
            self._last_left_counter = value
            self._last_left = None

    def walk(self, ordered: list[TrackedRequest]) -> Iterator[TrackedRequest]:
        per_client: dict[str, deque[TrackedRequest]] = {}
        for req in sorted(ordered, key=lambda r: r.seq):
            if req.state is RequestState.QUEUED:
                per_client.setdefault(req.client, deque()).append(req)
        heap = [(self.counters.get(c, 0.0), q[0].seq, c) for c, q in per_client.items()]
        heapq.heapify(heap)
        while heap:
            value, _, client = heapq.heappop(heap)
            pending = per_client[client]
            while pending and pending[0].state is not RequestState.QUEUED:
                pending.popleft()
            if not pending:
                continue
            current = self.counters.get(client, 0.0)
            if value != current:  # counter moved since it was pushed: re-rank
                heapq.heappush(heap, (current, pending[0].seq, client))
                continue
            yield pending.popleft()
            if pending:
                heapq.heappush(heap, (self.counters.get(client, 0.0), pending[0].seq, client))
