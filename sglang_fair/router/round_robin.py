"""Round-robin: SGLang's default data-parallel routing, locality- and client-blind."""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.router.base import Router
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S


class RoundRobinRouter(Router):
    name = "round_robin"

    def __init__(self, num_workers: int) -> None:
        super().__init__(num_workers)
        self._next = 0

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int:
        self.live_workers()  # raises if none is left
        # Skip dead workers; at most num_workers steps since one is alive.
        while not self.alive[self._next]:
            self._next = (self._next + 1) % self.num_workers
        worker = self._next
        self._next = (self._next + 1) % self.num_workers
        return self._record(rid, client, worker, len(tokens))


class PerClientRoundRobinRouter(Router):
    """Each client's requests rotate over the workers independently.

    The distributed VTC of the DLPM paper (Appendix A.3): a backlogged client is
    backlogged on every worker, so local VTC/DLPM fairness carries over
    globally, at the price of all locality.
    """

    name = "per_client_round_robin"

    def __init__(self, num_workers: int, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> None:
        super().__init__(num_workers, idle_timeout_s)
        self._next: dict[str, int] = {}
        self._starts = 0  # clients seen, to spread their first workers

    def forget_client(self, client: str) -> None:
        self._next.pop(client, None)

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int:
        self.live_workers()
        # Start each client at a different worker so light clients do not all pile on worker 0.
        nxt = self._next.get(client)
        if nxt is None:
            nxt = self._starts % self.num_workers
            self._starts += 1
        while not self.alive[nxt]:
            nxt = (nxt + 1) % self.num_workers
        self._next[client] = (nxt + 1) % self.num_workers
        return self._record(rid, client, nxt, len(tokens))
