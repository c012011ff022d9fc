"""Preble-style exploit/explore routing (Preble, WukLab; see docs/router.md).

* Exploit: when the cached prefix is longer than the uncached rest, go to the
  least-loaded worker holding it, unless that worker's load exceeds
  ``rebalance_ratio`` x the lightest worker's load and by more than
  ``rebalance_min_work`` (then go to the lightest). Preble measures load over
  a time window, which is rarely zero; the absolute floor plays that role
  here so that one request on an otherwise idle cluster does not count as
  imbalance.
* Explore: otherwise go to the worker with the lowest estimated cost: its
  current load plus this request's prefill (uncached part on that worker) and
  decode work.

Load is estimated work in flight: ``prefill_cost`` per uncached input token
plus ``decode_cost`` per requested output token, in the units of the service
cost (w_e, w_q). Preble fits these to measured step times; weights in service
units keep the rule engine-agnostic. No notion of clients: locality first.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.router.base import Dispatch
from sglang_fair.router.d2lpm import check_weight
from sglang_fair.router.indexed import IndexedRouter
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS, workers_of


class PrebleRouter(IndexedRouter):
    name = "preble"

    def __init__(
        self,
        num_workers: int,
        prefill_cost: float = 1.0,
        decode_cost: float = 2.0,
        rebalance_ratio: float = 1.5,
        rebalance_min_work: float = 4096.0,
        index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS,
    ) -> None:
        super().__init__(num_workers, index_capacity_tokens)
        self.prefill_cost = check_weight("prefill cost", prefill_cost)
        self.decode_cost = check_weight("decode cost", decode_cost)
        if not rebalance_ratio >= 1:
            raise ValueError(f"preble rebalance ratio must be >= 1, got {rebalance_ratio!r}")
        self.rebalance_ratio = float(rebalance_ratio)
        self.rebalance_min_work = check_weight("rebalance_min_work", rebalance_min_work)
        self.load = [0.0] * num_workers
        self._work: dict[str, float] = {}

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int:
        live = self.live_workers()
        n = len(tokens)
        match = self.index.match(tokens)
        holders = [w for w in workers_of(match.workers) if self.alive[w]] if match.length else []
        load = self.load
        if holders and match.length > n - match.length:
            worker = min(holders, key=lambda w: load[w])
            lightest = min(live, key=lambda w: load[w])
            excess = load[worker] - load[lightest]
            if load[worker] > self.rebalance_ratio * load[lightest] and excess > self.rebalance_min_work:
                worker = lightest
        else:
            decode = self.decode_cost * max_new_tokens
            worker = min(live, key=lambda w: load[w] + self.prefill_cost * (n - match.cached_len(w)) + decode)
        work = self.prefill_cost * (n - match.cached_len(worker)) + self.decode_cost * max_new_tokens
        self._record(rid, client, worker, n)
        self._work[rid] = work
        load[worker] += work
        self.index.insert(tokens, worker, after=match)
        return worker

    def _finished(self, rid: str, dispatch: Dispatch, output_tokens: int) -> None:
        self.load[dispatch.worker] = max(0.0, self.load[dispatch.worker] - self._work.pop(rid, 0.0))

    def on_worker_down(self, worker: int) -> list[str]:
        lost = super().on_worker_down(worker)
        for rid in lost:
            self._work.pop(rid, None)
        self.load[worker] = 0.0
        return lost
