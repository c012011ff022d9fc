"""The KV pool of one simulated worker, in tokens.

Radix-tree tokens (evictable or locked by running requests) + tokens held
privately by requests (decode outputs and prefills not yet in the tree) + free.
Allocation evicts least-recently-used unlocked leaves when the free part is short.
"""

from __future__ import annotations

from collections.abc import Callable

from sglang_fair.sim.radix import Node, RadixCache
from sglang_fair.sim.worker.config import SimulationError, WorkerStats
from sglang_fair.sim.worker.request import SimRequest


class KVPool:
    def __init__(self, rank: int, size: int, stats: WorkerStats,
                 on_evict: Callable[[int, Node], None] | None = None) -> None:
        self.rank = rank
        self.size = size
        self.stats = stats
        self.cache = RadixCache(on_evict=self._evicting if on_evict else None)
        self._on_evict = on_evict
        self.private = 0  # KV slots held outside the tree

    def available(self) -> int:
        return self.size - self.cache.total_size - self.private

    def room(self) -> int:
        """Free plus evictable tokens: what an allocation can get."""
        return self.available() + self.cache.evictable_size

    def usage(self) -> float:
        """Share of the pool in use, evictable cache counted as free (SGLang's token usage)."""
        pool = self.size
        usage = (pool - self.available() - self.cache.evictable_size) / pool
        return min(max(usage, 0.0), 1.0)

    def allocate(self, tokens: int) -> None:
        """Hold ``tokens`` more slots privately, evicting cache first if the free part is short."""
        short = tokens - self.available()
        if short > 0:
            self.stats.evicted_tokens += self.cache.evict(short)
        if tokens > self.available():
            raise SimulationError(f"worker {self.rank}: KV pool overcommitted ({tokens} needed, "
                                  f"{self.available()} free)")
        self.private += tokens

    def allocate_prefill(self, batch: list[SimRequest]) -> None:
        """Slots for what each request of a prefill batch computes (up to its ``target``)."""
        self.allocate(sum(r.target - r.computed for r in batch))
        for r in batch:
            r.private += r.target - r.computed

    def checkpoint(self, req: SimRequest, tokens: tuple[int, ...]) -> None:
        """Move the request's computed KV into the tree and re-lock its new end."""
        self.cache.insert(tokens)
        new_node = self.cache.match(tokens).node
        self.cache.lock(new_node)
        self.cache.unlock(req.node)
        req.node = new_node
        self.private -= req.private
        req.private = 0
        req.computed = len(tokens)

    def retire(self, req: SimRequest, tokens: tuple[int, ...]) -> None:
        """A finished request: cache ``tokens`` and unlock them (they become evictable)."""
        self.checkpoint(req, tokens)
        self.cache.unlock(req.node)
        req.node = None

    def release(self, req: SimRequest) -> None:
        """Free a running request's KV (outputs are recomputed on re-admission), as SGLang's release_req."""
        self.private -= req.private
        req.private = 0
        self.cache.unlock(req.node)
        req.node = None
        req.computed = 0

    def _evicting(self, node: Node) -> None:
        self._on_evict(self.rank, node)  # type: ignore[misc]
