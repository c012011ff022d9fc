"""Preble's locality rules in DLPM's service units: which room a candidate ranks for, and which
candidates DLPM would send now are left for the worker that caches their prefix.

A client running more than its share of the dispatched requests is not spread for latency: a
room that does not cache most of its prompt, while another worker does, goes to another
candidate if one may take it; recomputing a prefix there would come out of everyone's
throughput, to shorten the wait of the client that has most.
"""

from __future__ import annotations

from sglang_fair.core import FairScheduler
from sglang_fair.core.isolation import above_fair_share
from sglang_fair.router.global_dlpm.held import HeldRequest
from sglang_fair.router.global_dlpm.local_queues import LocalQueues
from sglang_fair.router.global_dlpm.options import GlobalDLPMOptions
from sglang_fair.router.global_dlpm.prefill_waits import PrefillWaits


class LocalityRules:
    def __init__(self, options: GlobalDLPMOptions, queues: LocalQueues, waits: PrefillWaits) -> None:
        self.ratio = options.affinity_ratio  # None: the rules are off
        self.input_weight = options.input_weight
        self.queues, self.waits = queues, waits
        self.num_workers = len(queues.local)

    def best_room(self, held: HeldRequest, rooms: list[int]) -> int:
        """The room caching most of the prompt, then the least loaded."""
        load, local_tokens, lens = self.queues.load, self.queues.tokens, held.lens
        return max(rooms, key=lambda w: (lens[w], -load[w], -local_tokens[w], -w))

    def rebalanced(self, held: HeldRequest, best: int, rooms: list[int]) -> int:
        """Preble's rebalance: the worker caching most is skipped when its work in
        flight exceeds ``affinity_ratio`` x the lightest worker's plus the prefill the
        lightest would add; else a shared template would pull every request to the
        few workers that cache it."""
        if self.ratio is None or self.waits.computes_prefix(held, best):
            return best
        load, we, n, lens = self.queues.load, self.input_weight, len(held.tokens), held.lens
        light = min(rooms, key=lambda w: (load[w] + we * (n - lens[w]), w))
        if load[best] > self.ratio * load[light] + we * (lens[best] - lens[light]):
            return light
        return best

    def live_holders(self, held: HeldRequest, worker: int) -> list[int]:
        """The live workers caching most of the prompt, when ``worker`` caches less of it
        (empty without the rules, or when the match is not most of the prompt)."""
        if self.ratio is None or held.length <= held.lens[worker] or 2 * held.length <= len(held.tokens):
            return []
        alive = self.queues.alive
        return [h for h in range(self.num_workers) if held.holders >> h & 1 and alive[h]]

    def belongs_elsewhere(self, held: HeldRequest, worker: int, holders: list[int]) -> bool:
        """Most of the prompt is cached on another worker (``holders``, from ``live_holders``)
        whose extra load is smaller than the prefill it would cost to recompute here, or which is
        computing that prefix for another request now (``computes_prefix``): leave the request
        for that worker (Preble's exploit rule, priced in the same service units). Only
        requests DLPM would dispatch now are passed over, so this costs idle time, never fairness."""
        if not holders or self.ratio is None:
            return False
        if any(self.waits.computes_prefix(held, h) for h in holders):
            return True
        load = self.queues.load
        recompute = self.input_weight * (held.length - held.lens[worker])
        return min(load[h] for h in holders) <= self.ratio * load[worker] + recompute


class OverShare:
    """The clients over their share of the dispatched requests, found when first asked (most
    placements of a backlog never ask); nobody is, without the locality rules."""

    def __init__(self, fair: FairScheduler, rules_on: bool) -> None:
        self.fair, self.rules_on = fair, rules_on
        self._clients: set[str] | None = None

    def __contains__(self, client: str) -> bool:
        if not self.rules_on:
            return False
        if self._clients is None:
            self._clients = above_fair_share(self.fair.activity, self.fair.options.weight_of)
        return client in self._clients


class LocalityPass:
    """The rules of one placement pass, with what they read of the workers taken once, when first
    needed: a pass may weigh hundreds of candidates against the same loads. Only the workers
    that may be computing a held prompt's prefix need the rules' per-request comparisons."""

    def __init__(self, rules: LocalityRules) -> None:
        self.rules = rules
        self._alive_mask: int | None = None
        self._busy_mask: int | None = None
        self._least_load: dict[int, float] = {}  # holders' mask -> their least load

    def alive_mask(self) -> int:
        if self._alive_mask is None:
            alive = self.rules.queues.alive
            self._alive_mask = sum(1 << w for w in range(self.rules.num_workers) if alive[w])
        return self._alive_mask

    def busy_mask(self) -> int:
        """The workers that may compute a held prompt's prefix: with their next batch (the one request in
        their local queue), or in the chunks they are prefilling."""
        if self._busy_mask is None:
            waits = self.rules.waits
            self._busy_mask = sum(1 << w for w in range(self.rules.num_workers)
                                  if waits.prefilling[w] or waits.may_pend(w))
        return self._busy_mask

    def passed_over(self, held: HeldRequest) -> tuple[bool, int]:
        """Whether a rule leaves ``held`` for another worker or a later batch, and the mask of its
        live holders (0: the room caches as much as any worker, or the rules are off)."""
        rules, room = self.rules, held.room
        mask = 0
        if rules.ratio is not None and held.length > held.lens[room] and 2 * held.length > len(held.tokens):
            mask = held.holders & self.alive_mask()
        if mask:
            if mask & self.busy_mask():
                holders = [h for h in range(rules.num_workers) if mask >> h & 1]
                if rules.belongs_elsewhere(held, room, holders):
                    return True, mask
            else:
                least = self._least_load.get(mask)
                load = rules.queues.load
                if least is None:
                    least = self._least_load[mask] = min(load[h] for h in range(rules.num_workers) if mask >> h & 1)
                recompute = rules.input_weight * (held.length - held.lens[room])
                if least <= rules.ratio * load[room] + recompute:
                    return True, mask
        return rules.waits.may_pend(room) and rules.waits.shares_pending(held, room), mask
