"""SGLang model gateway's ``cache_aware`` rule (sgl-model-gateway), re-expressed.

* If the load is imbalanced (max - min in-flight > ``balance_abs_threshold``
  and max > ``balance_rel_threshold`` x min), go to the shortest queue.
* Else, if the longest cached match covers more than ``cache_threshold`` of
  the prompt, go to the worker holding it (least-loaded on ties).
* Else go to the worker whose tree is smallest (most free cache, presumably).

Like the gateway, the tree is approximate, built from routing history only:
KV-cache feedback is ignored, entries leave only by the LRU size cap or when a
worker dies. Matching is on tokens where the gateway matches text.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.router.base import Router
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS, RadixIndex, workers_of


class CacheAwareRouter(Router):
    name = "cache_aware"

    def __init__(
        self,
        num_workers: int,
        cache_threshold: float = 0.3,
        balance_abs_threshold: int = 64,
        balance_rel_threshold: float = 1.5,
        index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS,
    ) -> None:
        super().__init__(num_workers)
        if not 0 <= cache_threshold <= 1:
            raise ValueError(f"cache_aware cache_threshold must be in [0, 1], got {cache_threshold!r}")
        if balance_abs_threshold < 0 or not balance_rel_threshold >= 1:
            raise ValueError("cache_aware balance thresholds must be abs >= 0 and rel >= 1")
        self.cache_threshold = float(cache_threshold)
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = float(balance_rel_threshold)
        self.index = RadixIndex(num_workers, index_capacity_tokens)

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int:
        live = self.live_workers()
        sizes = self.queue_sizes
        lo = min(sizes[w] for w in live)
        hi = max(sizes[w] for w in live)
        match = None
        if hi - lo > self.balance_abs_threshold and hi > self.balance_rel_threshold * lo:
            worker = self.least_loaded(live)
        else:
            match = self.index.match(tokens)
            holders = [w for w in workers_of(match.workers) if self.alive[w]] if match.length else []
            if holders and match.length > self.cache_threshold * len(tokens):
                worker = self.least_loaded(holders)
            else:
                tree = self.index.worker_tokens
                worker = min(live, key=lambda w: tree[w])
        self._record(rid, client, worker, len(tokens))
        self.index.insert(tokens, worker, after=match)
        return worker
