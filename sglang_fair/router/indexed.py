"""A router whose global radix index is fed by the workers' cache events.

D²LPM and the Preble-style router both keep which worker caches which prefix
from two sources: their own dispatches (``route`` inserts the prompt) and the
workers' KV events (stored, evicted, cleared), so the index follows what the
workers really hold. Both kinds of feedback are handled here once.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.router.base import Router
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS, RadixIndex


class IndexedRouter(Router):
    def __init__(
        self,
        num_workers: int,
        index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        super().__init__(num_workers, idle_timeout_s)
        self.index = RadixIndex(num_workers, index_capacity_tokens)

    def on_cached(self, worker: int, tokens: Sequence[int]) -> None:
        if 0 <= worker < self.num_workers and self.alive[worker] and tokens:
            self.index.insert(tokens, worker)

    def on_evicted(self, worker: int, tokens: Sequence[int]) -> None:
        if 0 <= worker < self.num_workers:
            self.index.prune(tokens, worker)

    def on_cache_cleared(self, worker: int) -> None:
        if 0 <= worker < self.num_workers:
            self.index.drop_worker(worker)
