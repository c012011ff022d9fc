"""Cluster-wide DLPM with late binding: D²LPM made fair across workers.

Why not Algorithm 2 alone: D²LPM places a request on a worker when it
arrives, and each worker's DLPM is then fair only among the clients queued on
*that* worker. A client queued on three workers gets three workers' worth of
service while a client whose one request waits on a fourth gets one; with
closed-loop programs (ToT, chat) this is the normal case, not a corner, and
no per-worker counter can repair it once the placement is made.

So the router keeps the queue that matters. A request waits in the router
until some worker has room in a short local queue (at most
``local_queue_requests`` requests and ``local_queue_tokens`` uncached prompt
tokens dispatched there and not yet admitted into a batch; at most
``queue_beyond_free_slots`` more than its free running slots). Which waiting
request goes where is decided by one DLPM instance (``sglang_fair.core``, the
code every worker runs) over the whole cluster's waiting requests:

* candidates are (request, worker with room) pairs in longest-prefix-match
  order, the match read from the global prefix index for that worker; among
  equal matches the request that loses least cache by going there comes
  first (its longest match anywhere minus its match here);
* one deficit counter per client, refilled by ``quantum`` only when no
  waiting client has a positive one (Algorithm 1's CHECKREFILL), gates them;
* a dispatch charges w_e x the part of the prompt *not* cached on the chosen
  worker, and every output token w_q as the workers report progress;
* a client running more than its share of the dispatched requests is not
  spread for latency (Preble's rebalance and exploit rules): a room that does
  not cache most of its prompt, while another worker does, goes to another
  candidate if one may take it; recomputing a prefix there would come out of
  everyone's throughput, to shorten the wait of the client that has most;
* when the workers mix chunks and the router knows their chunk size, a worker
  prefilling a prompt of several chunks takes only requests that share it
  until that prompt's first token (``_prefill_bound``);
* with ``lane_workers`` (off by default), the last workers are lanes: the
  clients over their share hold at most ``lane_tokens`` there, and while they
  flood the others, the clients under their share go to a lane when one has
  room (``lanes.py``).

A worker with room always receives work while any request waits (DLPM's walk
is work-conserving; a worker the second-to-last rule passes over is busy
prefilling), so the cluster is work-conserving up to the feedback delay; the
local queues keep each worker's next batch ready meanwhile. Lanes are the
exception, by design: a lane's unused room is the price of short decode steps.

With ``reserve_for_newcomers`` (on under ``--fair-isolation``) each local
queue keeps one more place for a client with nothing dispatched anywhere: a
light tenant's request then reaches a worker at once instead of waiting,
behind full local queues, for the flood's next batch to leave one, and the
worker's latency isolation can give it a running slot; and a client new to
the router starts with one quantum instead of 0, so that the place is not
left empty while the flood spends its deficit. Theorem G holds with
``R + 1`` in place of ``R``.
docs/fairness.md proves the resulting bound (Theorem G),
2 (Q + w_q |W| M_G + w_e |W| (B + L + R L)) between any two clients that both
have a request waiting anywhere, in the router or in a local queue
(B, R = ``local_queue_tokens``, ``local_queue_requests``; M_G = output a
worker's batch and local queue can still produce), and
tests/router/test_global_dlpm.py checks it on randomized traces.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.isolation import above_fair_share
from sglang_fair.core.options import DEFAULT_QUANTUM, SettingsUpdate
from sglang_fair.core.requests import TrackedRequest
from sglang_fair.router.base import HOLD_REASONS, Dispatch, RouterSnapshot
from sglang_fair.router.d2lpm import check_quantum, check_weight
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S
from sglang_fair.router.indexed import IndexedRouter
from sglang_fair.router.lanes import DEFAULT_LANE_HOLD_S, DEFAULT_LANE_TOKENS, Lanes, check_lane_options
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS, PACKED_TOKEN_BYTES, Match, common_prefix_len, pack

NO_ROOM, DEFICIT, PASSED_OVER = HOLD_REASONS

# About one uncached prompt per worker (each dispatch may overshoot by one prompt): the
# rest wait in the router and bind later, against fresher cache state. 8,192 (a prefill
# batch) let new prompts queue ahead of held requests whose prefixes they then evicted
# (docs/sim-trends/README.md, "The local queue").
DEFAULT_LOCAL_QUEUE_TOKENS = 2048
DEFAULT_LOCAL_QUEUE_REQUESTS = 16
# A worker admits only into free running slots (``worker_max_running``); what waits beyond them
# in its local queue is pinned to it, and at a flood's end another worker idles while it drains
# (docs/router.md, rule 1). Four more than its free slots keep its next admissions ready.
DEFAULT_QUEUE_BEYOND_FREE_SLOTS = 4
# Running requests this close to their last token (max_new less the output reported) count as
# slots about to free: a batch admitted together ends together, and with room in the local queue
# for only four more, the worker refilled it in two or three admission passes (prefills) while the
# router's next dispatches were on their way. Two of the schedulers' progress reports (every 4 tokens).
DEFAULT_FINISHING_TOKENS = 8
DEFAULT_CANDIDATES_PER_CLIENT = 16  # a client's oldest waiting requests considered per dispatch
DEFAULT_AFFINITY_RATIO = 1.5  # Preble's rebalance ratio
# The shared-prefill wait applies from this many shared not-yet-computed prompt tokens
# (SGLang's IN_BATCH_PREFIX_CACHING thresholds).
SHARED_PREFILL_MIN_TOKENS = 32
_PREFIX_KEY_TOKENS = 16  # requests sharing these first tokens likely share a longer prefix


@dataclass(eq=False)
class _Waiting:
    """A request the router holds, and what the index says of it.

    ``lens``, ``length`` and ``holders`` (``Match.cached_lens``, ``length`` and
    ``workers``) rank it for placement. Matches shorter than ``_PREFIX_KEY_TOKENS``
    count as none: a shared first token or two saves no prefill worth steering a
    request away from the least-loaded worker for, and only longer matches are
    kept current as follows. Dispatches of look-alikes (same first
    ``_PREFIX_KEY_TOKENS`` tokens) update them by their common prefix: what a new
    lookup would add, for one compare of packed prompts instead of a tree walk.
    Evictions and the workers' cache reports on its path mark it ``stale``: it is
    looked up again before it is ranked.
    """

    rid: str
    client: str
    tokens: Sequence[int]  # as routed (the index's walks are reused for this object only)
    max_new: int
    match: Match  # for the charge at dispatch: reused if the index has not changed since
    key: int  # hash of the first tokens
    lens: list[int] = dataclasses.field(default_factory=list)
    length: int = 0
    holders: int = 0
    room: int = -1  # the worker the last placement pass chose for it
    stale: bool = False

    def rank_by(self, match: Match, num_workers: int) -> None:
        """Take ``match`` (of this prompt, current) as what ranks the request."""
        self.match, self.stale = match, False
        self.lens = [n if n >= _PREFIX_KEY_TOKENS else 0 for n in match.cached_lens(num_workers)]
        self.length, self.holders = (match.length, match.workers) if match.length >= _PREFIX_KEY_TOKENS else (0, 0)

    def sibling_placed(self, packed: bytes, worker: int) -> bool:
        """A request sharing this one's first tokens now caches ``packed`` (``pack``) on ``worker``;
        whether that changed how the request ranks."""
        common = common_prefix_len(self.match.packed, packed)
        if common < _PREFIX_KEY_TOKENS:
            return False
        changed = common > self.lens[worker] or common > self.length
        if common > self.lens[worker]:
            self.lens[worker] = common
        if common > self.length:
            self.length, self.holders = common, 1 << worker
        elif common == self.length:
            self.holders |= 1 << worker
        return changed


class PlacementObserver(Protocol):
    """What ``GlobalDLPMRouter`` tells an observer (``router.observer``), at its clock's time ``t``."""

    def routed(self, rid: str, client: str, tokens: int, cached_anywhere: int, t: float) -> None:
        """A request arrived; ``cached_anywhere``: its longest prefix cached on any worker."""

    def dispatched(self, rid: str, worker: int, cached_there: int, t: float) -> None:
        """It was placed on ``worker``, which caches ``cached_there`` of its tokens."""

    def pumped(self, held: dict[str, str], t: float) -> None:
        """After each placement round: the requests still held and why (``hold_reasons``)."""


class _InOrder:
    """The requests of ``(key..., request)`` tuples, taken from an iterator that yields them in key
    order as far as read (a placement usually takes one of the first few), and kept: DLPM's walk
    may read the order again."""

    def __init__(self, keyed: Iterator[tuple]) -> None:
        self._keyed = keyed
        self._read: list[TrackedRequest] = []

    @classmethod
    def of(cls, keyed: list[tuple]) -> _InOrder:
        """The tuples of an unordered list, sorted only as far as read."""
        heapq.heapify(keyed)  # the keys end in a unique seq: tuples never compare the requests
        return cls(_popped(keyed))

    def __iter__(self) -> Iterator[TrackedRequest]:
        i = 0
        while True:
            if i == len(self._read):  # past what any pass has read: take one more
                following = next(self._keyed, None)
                if following is None:
                    return
                self._read.append(following[-1])
            yield self._read[i]
            i += 1


def _popped(heap: list[tuple]) -> Iterator[tuple]:
    while heap:
        yield heapq.heappop(heap)


def _in_room(keyed: Iterator[tuple], room: int) -> Iterator[tuple]:
    """The tuples of ``keyed``, each request's room set to ``room`` as it is read."""
    for item in keyed:
        item[-1].payload.room = room
        yield item


class _LocalityPass:
    """The locality rules of one placement pass (``_live_holders``, ``_belongs_elsewhere``,
    ``_shares_pending_prefill``), with what they read of the workers taken once, when first
    needed: a pass may weigh hundreds of candidates against the same loads. Only the workers
    that may be computing a held prompt's prefix need the rules' per-request comparisons."""

    def __init__(self, router: GlobalDLPMRouter) -> None:
        self.router = router
        self.ratio = router.affinity_ratio
        self._alive_mask: int | None = None
        self._busy_mask: int | None = None
        self.least_load: dict[int, float] = {}  # holders' mask -> their least load

    def alive_mask(self) -> int:
        if self._alive_mask is None:
            alive = self.router.alive
            self._alive_mask = sum(1 << w for w in range(self.router.num_workers) if alive[w])
        return self._alive_mask

    def busy_mask(self) -> int:
        """The workers that may compute a held prompt's prefix: with their next batch (the one request in
        their local queue, ``_pending_shared_tokens``), or in the chunks they are prefilling."""
        if self._busy_mask is None:
            router = self.router
            self._busy_mask = sum(1 << w for w in range(router.num_workers)
                                  if router.prefilling[w] or self._may_pend(w))
        return self._busy_mask

    def _may_pend(self, worker: int) -> bool:
        router = self.router
        return router.wait_for_shared_prefill and len(router.local[worker]) == 1 and router._free_slots(worker) != 0

    def passed_over(self, held: _Waiting) -> tuple[bool, int]:
        """Whether a locality rule leaves ``held`` for another worker or a later batch, and the mask
        of its live holders (0: the room caches as much as any worker, or the rules are off)."""
        router, room = self.router, held.room
        mask = 0
        if self.ratio is not None and held.length > held.lens[room] and 2 * held.length > len(held.tokens):
            mask = held.holders & self.alive_mask()
        if mask:
            if mask & self.busy_mask():
                holders = [h for h in range(router.num_workers) if mask >> h & 1]
                if router._belongs_elsewhere(held, room, holders):
                    return True, mask
            else:
                least = self.least_load.get(mask)
                if least is None:
                    load = router.load
                    least = self.least_load[mask] = min(load[h] for h in range(router.num_workers) if mask >> h & 1)
                recompute = router.input_weight * (held.length - held.lens[room])
                if least <= self.ratio * router.load[room] + recompute:
                    return True, mask
        return self._may_pend(room) and router._shares_pending_prefill(held, room), mask


class GlobalDLPMRouter(IndexedRouter):
    name = "d2lpm_global"
    holds_requests = True
    follows_policy_quantum = True  # its DLPM is the cluster's: Q is the workers' Q^u unless set for the router

    def __init__(
        self,
        num_workers: int,
        quantum: float = DEFAULT_QUANTUM,
        input_weight: float = 1.0,
        output_weight: float = 2.0,
        local_queue_tokens: int = DEFAULT_LOCAL_QUEUE_TOKENS,
        local_queue_requests: int = DEFAULT_LOCAL_QUEUE_REQUESTS,
        queue_beyond_free_slots: int = DEFAULT_QUEUE_BEYOND_FREE_SLOTS,
        finishing_tokens: int = DEFAULT_FINISHING_TOKENS,
        candidates_per_client: int = DEFAULT_CANDIDATES_PER_CLIENT,
        affinity_ratio: float | None = DEFAULT_AFFINITY_RATIO,
        wait_for_shared_prefill: bool = True,
        worker_max_running: int | None = None,
        worker_chunk_tokens: int | None = None,
        client_weights: dict[str, float] | None = None,
        reserve_for_newcomers: bool = False,
        lane_workers: int = 0,
        lane_tokens: int = DEFAULT_LANE_TOKENS,
        lane_hold_s: float = DEFAULT_LANE_HOLD_S,
        index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        super().__init__(num_workers, index_capacity_tokens, idle_timeout_s)
        check_quantum(quantum)
        if not math.isfinite(quantum):
            raise ValueError("router quantum must be finite for d2lpm_global (it is the fairness quantum)")
        self.input_weight = check_weight("input weight w_e", input_weight)
        self.output_weight = check_weight("output weight w_q", output_weight)
        for name, value in (("local_queue_tokens", local_queue_tokens), ("local_queue_requests", local_queue_requests),
                            ("queue_beyond_free_slots", queue_beyond_free_slots),
                            ("candidates_per_client", candidates_per_client)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"router {name} must be a positive integer, got {value!r}")
        self.local_queue_tokens = local_queue_tokens
        self.local_queue_requests = local_queue_requests
        self.queue_beyond_free_slots = queue_beyond_free_slots
        if isinstance(finishing_tokens, bool) or not isinstance(finishing_tokens, int) or finishing_tokens < 0:
            raise ValueError(f"router finishing_tokens must be an integer >= 0, got {finishing_tokens!r}")
        self.finishing_tokens = finishing_tokens
        self.candidates_per_client = candidates_per_client
        if affinity_ratio is not None and not (isinstance(affinity_ratio, (int, float)) and affinity_ratio >= 1):
            raise ValueError(f"router affinity_ratio must be a number >= 1 or None, got {affinity_ratio!r}")
        self.affinity_ratio = None if affinity_ratio is None else float(affinity_ratio)
        if not isinstance(wait_for_shared_prefill, bool):
            raise ValueError(f"router wait_for_shared_prefill must be true or false, got {wait_for_shared_prefill!r}")
        self.wait_for_shared_prefill = wait_for_shared_prefill
        if not isinstance(reserve_for_newcomers, bool):
            raise ValueError(f"router reserve_for_newcomers must be true or false, got {reserve_for_newcomers!r}")
        self.reserve_for_newcomers = reserve_for_newcomers
        if worker_max_running is not None and (isinstance(worker_max_running, bool)
                                               or not isinstance(worker_max_running, int) or worker_max_running < 1):
            raise ValueError(f"router worker_max_running must be a positive integer or None, got {worker_max_running!r}")
        # The workers' --max-running-requests when known: a worker with a full batch admits
        # nothing at its next batch, so nothing should wait for its local queue.
        self.worker_max_running = worker_max_running
        if worker_chunk_tokens is not None and (isinstance(worker_chunk_tokens, bool)
                                                or not isinstance(worker_chunk_tokens, int) or worker_chunk_tokens < 1):
            raise ValueError(f"router worker_chunk_tokens must be a positive integer or None, got {worker_chunk_tokens!r}")
        # The workers' --chunked-prefill-size when known: a prompt longer than one chunk keeps its
        # worker prefilling for several batches, which admit nothing else (``_prefill_bound``).
        self.worker_chunk_tokens = worker_chunk_tokens
        # The cluster's one DLPM: "queued" = waiting in this router, "running" =
        # dispatched and not finished; its clock is the router's (virtual in the simulator).
        # With the kept place, a client new to the router also starts with one quantum, as
        # the workers' DLPM does under --fair-isolation: at 0 it would wait, place or not,
        # until every held client's deficit is spent (beside a flood, most of a round).
        self.fair = FairScheduler(
            FairOptions(policy="dlpm", quantum=float(quantum), input_weight=self.input_weight,
                        output_weight=self.output_weight, cost="prefix-aware",
                        client_weights=dict(client_weights or {}), idle_timeout_s=idle_timeout_s,
                        isolation=reserve_for_newcomers),
            clock=lambda: self.clock(),
        )
        self.waiting: dict[str, dict[str, TrackedRequest]] = {}  # client -> its held requests, oldest first
        self.by_key: dict[int, set[str]] = {}  # prefix key -> held rids
        # client -> worker -> the client's candidates (its oldest ``candidates_per_client`` held
        # requests) ranked for that worker, kept until one of them changes (``_reorder``): a backlog
        # places one freed room at a time, and most clients' candidates are as they were.
        self._ranked: dict[str, dict[int, list[tuple[int, int, int, TrackedRequest]]]] = {}
        self.tracked: dict[str, TrackedRequest] = {}  # every request the router holds or has placed
        # Dispatched and not yet admitted, per worker: rid -> uncached tokens charged.
        self.local: list[dict[str, int]] = [{} for _ in range(num_workers)]
        self.local_tokens = [0] * num_workers
        # Dispatched requests' max new tokens, and per worker the running ones within
        # ``finishing_tokens`` of their last (``_local_queue_limit`` counts them as free slots).
        self._max_new: dict[str, int] = {}
        self.finishing: list[set[str]] = [set() for _ in range(num_workers)]
        # The same requests' prompts, for the shared-prefill wait: rid -> (prefix key,
        # packed prompt, tokens cached at dispatch).
        self._sent: dict[str, tuple[int, bytes, int]] = {}
        # Admitted prompts of more than one chunk whose first output token is not reported
        # yet, per worker: rid -> (prefix key, packed prompt).
        self.prefilling: list[dict[str, tuple[int, bytes]]] = [{} for _ in range(num_workers)]
        # Work in flight per worker, as Preble estimates it: uncached prompt + w_q x max output.
        self.load = [0.0] * num_workers
        self._work: dict[str, float] = {}
        self._released: list[tuple[str, int]] = []
        self._next_gc = 0.0
        self.observer: PlacementObserver | None = None  # e.g. a study of why requests wait here
        # Workers kept light for the clients under their share (``lanes.py``); None: no lanes.
        check_lane_options(num_workers, lane_workers, lane_tokens, lane_hold_s)
        self.lanes = Lanes(num_workers, lane_workers, lane_tokens, lane_hold_s) if lane_workers else None
        self.index.watch_removals(_PREFIX_KEY_TOKENS)

    # ---- requests in ------------------------------------------------------------

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int | None:
        self.live_workers()  # NoLiveWorkerError before anything is recorded
        if rid in self.tracked:
            raise ValueError(f"router {self.name}: request id {rid!r} is already in flight")
        self._collect_idle()
        match = self.index.match(tokens)
        if self.observer is not None:
            self.observer.routed(rid, client, len(tokens), match.length, self.clock())
        key = hash(match.packed[: _PREFIX_KEY_TOKENS * PACKED_TOKEN_BYTES])
        held = _Waiting(rid, client, tokens, int(max_new_tokens), match, key)
        held.rank_by(match, self.num_workers)
        tracked = self.fair.enqueue(rid, client, len(tokens), payload=held)
        self.tracked[rid] = tracked
        reqs = self.waiting.setdefault(tracked.client, {})
        reqs[rid] = tracked
        if len(reqs) <= self.candidates_per_client:  # one of the client's candidates
            self._reorder(tracked.client)
        self.by_key.setdefault(key, set()).add(rid)
        self._pump()
        for i, (done, worker) in enumerate(self._released):
            if done == rid:
                del self._released[i]
                return worker
        return None

    def take_released(self) -> list[tuple[str, int]]:
        out, self._released = self._released, []
        return out

    def cancel(self, rid: str) -> bool:
        tracked = self.tracked.get(rid)
        if tracked is None or rid in self.inflight:
            return False
        self._unhold(tracked)
        self.fair.finish(tracked)
        del self.tracked[rid]
        return True

    # ---- feedback ---------------------------------------------------------------

    def on_cached(self, worker: int, tokens: Sequence[int]) -> None:
        super().on_cached(worker, tokens)  # may lengthen held requests' matches
        self._mark_stale({pack(tokens[:_PREFIX_KEY_TOKENS])})

    def on_admitted(self, rid: str, worker: int, cached_tokens: int | None = None) -> None:
        dispatch = self.inflight.get(rid)
        if dispatch is None or rid not in self.local[dispatch.worker]:
            return  # unknown, or a re-admission after a retraction
        self._note_long_prefill(rid, dispatch.worker, cached_tokens)
        self._leave_local(rid, dispatch.worker)
        self._note_finishing(rid, dispatch.worker, 0)
        if cached_tokens is not None:  # what the worker really computed, not what the index believed
            self.fair.correct_admission(self.tracked[rid], int(cached_tokens))
        self._pump()

    def on_progress(self, rid: str, worker: int, output_tokens: int) -> None:
        tracked = self.tracked.get(rid)
        if tracked is not None and rid in self.inflight:
            self.fair.produced(tracked, int(output_tokens))
            if rid not in self.local[worker] and self._note_finishing(rid, worker, int(output_tokens)):
                self._pump()  # its slot is about to free: its successor may go now
            if output_tokens > 0 and self.prefilling[worker].pop(rid, None) is not None:
                self._pump()  # the worker's batches take other prompts again

    def on_finish(self, rid: str, worker: int, output_tokens: int) -> None:
        super().on_finish(rid, worker, output_tokens)
        self._pump()

    def _note_finishing(self, rid: str, worker: int, output_tokens: int) -> bool:
        """Count ``rid``, running on ``worker``, as about to free its slot if it is; whether that is new."""
        if rid in self.finishing[worker]:
            return False
        if self._max_new.get(rid, self.finishing_tokens + 1) - output_tokens <= self.finishing_tokens:
            self.finishing[worker].add(rid)
            return True
        return False

    def _finished(self, rid: str, dispatch: Dispatch, output_tokens: int) -> None:
        self._leave_local(rid, dispatch.worker)
        self.finishing[dispatch.worker].discard(rid)
        self._max_new.pop(rid, None)
        self.prefilling[dispatch.worker].pop(rid, None)
        self.load[dispatch.worker] = max(0.0, self.load[dispatch.worker] - self._work.pop(rid, 0.0))
        if self.lanes is not None:
            self.lanes.finished(rid)
        tracked = self.tracked.pop(rid, None)
        if tracked is not None:
            self.fair.produced(tracked, output_tokens)
            self.fair.finish(tracked)

    def on_worker_down(self, worker: int) -> list[str]:
        lost = super().on_worker_down(worker)
        for rid in lost:
            self._finished(rid, Dispatch("", worker, 0), 0)
        if not any(self.alive):
            # Nobody can ever run the held requests: hand them back to be failed.
            held = [t for reqs in self.waiting.values() for t in reqs.values()]
            for tracked in held:
                self.cancel(tracked.rid)
            lost += [t.rid for t in held]
        else:
            self._pump()
        return lost

    def snapshot(self) -> RouterSnapshot:
        state = super().snapshot()
        state.held_requests = sum(len(reqs) for reqs in self.waiting.values())
        state.client_deficits = {c: q for c, q in self.fair.policy.deficits.items()}
        for client, why in self._client_hold_reasons():
            reasons = state.held_by_client.setdefault(client, {})
            reasons[why] = reasons.get(why, 0) + 1
        return state

    def update_settings(self, update: SettingsUpdate) -> None:
        # Throttle limits are the workers' (FairServe refuses arrivals there); the router's DLPM takes the rest.
        self.fair.update_settings(dataclasses.replace(update, throttle={}))

    # ---- placement --------------------------------------------------------------

    def _has_room(self, worker: int) -> bool:
        return (self.alive[worker] and len(self.local[worker]) < self._local_queue_limit(worker)
                and self.local_tokens[worker] < self.local_queue_tokens)

    def _newcomer_room(self, worker: int) -> bool:
        """The one place a full local queue keeps for a client with nothing dispatched."""
        return self.alive[worker] and len(self.local[worker]) <= self._local_queue_limit(worker)

    def _local_queue_limit(self, worker: int) -> int:
        """R, or the worker's free running slots, those about to free (``finishing``) and
        ``queue_beyond_free_slots`` if fewer (when ``worker_max_running`` is known). Counting
        free slots, not only a full batch: a batch that finishes together frees every slot at
        once, and a limit applied only once the next batch is full would find its local queue
        refilled to R meanwhile; counting those about to free, its successors are there when it
        does, and the worker admits them in one prefill instead of one per dispatch round."""
        free = self._free_slots(worker)
        if free is None:
            return self.local_queue_requests
        return min(self.local_queue_requests, free + len(self.finishing[worker]) + self.queue_beyond_free_slots)

    def _free_slots(self, worker: int) -> int | None:
        """Running slots the worker has free (None without ``worker_max_running``)."""
        if self.worker_max_running is None:
            return None
        running = self.queue_sizes[worker] - len(self.local[worker])  # dispatched, not finished or local
        return max(0, self.worker_max_running - running)

    def hold_reasons(self) -> dict[str, str]:
        """Why each held request is still here: ``no room`` (every local queue is full, the place
        kept for newcomers too when its client is one), ``deficit`` (its client's counter is spent)
        or ``passed over`` (others went first)."""
        return {rid: why for rid, why in self._client_hold_reasons(rids=True)}

    def _client_hold_reasons(self, rids: bool = False) -> list[tuple[str, str]]:
        """(client, or request id with ``rids``; reason) of every held request."""
        rooms = any(self._has_room(w) for w in range(self.num_workers))
        newcomer_rooms = self.reserve_for_newcomers and any(self._newcomer_room(w) for w in range(self.num_workers))
        deficits = self.fair.policy.deficits  # type: ignore[attr-defined]
        out = []
        for client, reqs in self.waiting.items():
            room = rooms or (newcomer_rooms and self.fair.activity[client].running == 0)
            why = NO_ROOM if not room else DEFICIT if deficits.get(client, 0.0) <= 0 else PASSED_OVER
            out += [(rid if rids else client, why) for rid in reqs]
        return out

    def _pump(self) -> None:
        self._place_held()
        if self.observer is not None:
            self.observer.pumped(self.hold_reasons(), self.clock())

    def _place_held(self) -> None:
        """Place held requests while some worker has room (each placement may fill one)."""
        while self.waiting:
            rooms = [w for w in range(self.num_workers) if self._has_room(w)]
            newcomers = None
            if not rooms and self.reserve_for_newcomers:
                newcomers = {c for c in self.waiting if self.fair.activity[c].running == 0}
                rooms = [w for w in range(self.num_workers) if self._newcomer_room(w)] if newcomers else []
            if not rooms:
                return
            picked = self._pick(rooms, newcomers)
            if picked is None:
                return
            self._dispatch(*picked)

    def _pick(self, rooms: list[int], only_clients: set[str] | None = None) -> tuple[TrackedRequest, int] | None:
        bound = self._prefill_bound(rooms) if self.worker_chunk_tokens is not None else {}
        # DLPM's walk yields only clients with a positive deficit, and CHECKREFILL
        # cannot refill while one is queued: rank those clients' requests only.
        # With none held, the walk's first step is CHECKREFILL; done here, it shows
        # at once whether anything may go (a client positive in a local queue
        # blocks the refill: then nothing may, and nothing is ranked).
        clients = self._positive_clients(only_clients)
        if not clients and self.fair.policy.check_refill():  # type: ignore[attr-defined]
            clients = self._positive_clients(only_clients)
        self._mark_stale(self.index.take_removals())
        # Clients over their share are not spread (both uses below are off without the affinity rule);
        # found only when a candidate asks, as most picks of a backlog never do.
        over_share: set[str] | None = None

        def is_over_share(client: str) -> bool:
            nonlocal over_share
            if self.affinity_ratio is None:
                return False
            if over_share is None:
                over_share = above_fair_share(self.fair.activity, self.fair.options.weight_of)
            return client in over_share

        lanes = (None if self.lanes is None
                 else self.lanes.view(self.fair.activity, self.fair.options.weight_of, self.clock(), self.alive, rooms))
        if len(rooms) == 1 and not bound and lanes is None:
            # A backlog is placed one freed room at a time: every candidate's room is that one, and
            # each client's candidates are ranked for it already unless one of them changed.
            only = rooms[0]
            order = _InOrder(_in_room(heapq.merge(*(self._ranked_for(client, reqs, only) for client, reqs in clients)),
                                      only))
        else:
            keyed: list[tuple[int, int, int, TrackedRequest]] = []
            per_client, index, n = self.candidates_per_client, self.index, self.num_workers
            for _client, reqs in clients:
                for tracked in itertools.islice(reqs.values(), per_client):
                    held: _Waiting = tracked.payload  # type: ignore[assignment]
                    if held.stale:
                        held.rank_by(index.refresh(held.match, touch=False), n)
                    open_rooms = rooms
                    if bound:
                        open_rooms = [w for w in rooms if w not in bound or self._shares_prompt(held, bound[w])]
                        if not open_rooms:
                            continue
                    if lanes is not None:
                        open_rooms = lanes.rooms_for(tracked.client, len(held.tokens) + held.max_new, open_rooms)
                        if not open_rooms:
                            continue
                    best = open_rooms[0]
                    if len(open_rooms) > 1:
                        best = self._best_room(held, open_rooms)
                        # Preble's rebalance, never for a client over its share: its cache room is as
                        # free to it as the lighter one (asked only when the rule would move it).
                        lighter = self._rebalanced(held, best, open_rooms)
                        if lighter != best and not is_over_share(tracked.client):
                            best = lighter
                    held.room = best
                    cached = held.lens[best]
                    keyed.append((-cached, held.length - cached, tracked.seq, tracked))
            order = _InOrder.of(keyed)
        fallback = None
        locality = _LocalityPass(self) if lanes is None else None
        for tracked in self.fair.walk(order):
            held = tracked.payload  # type: ignore[assignment]
            if locality is not None:
                passed_over, holders = locality.passed_over(held)
                if passed_over:
                    continue
            else:
                holders = lanes.holders_for(tracked.client, self._live_holders(held, held.room))
                if self._belongs_elsewhere(held, held.room, holders) or self._shares_pending_prefill(held, held.room):
                    continue
            # A client over its share would recompute here what another worker caches: Preble's rule
            # spends that prefill to shorten one request's wait, but the room would be used anyway, so
            # it comes out of the cluster's throughput. Another candidate takes the room if one may
            # (else this one: no room idles for it).
            if holders and is_over_share(tracked.client):
                if fallback is None:
                    fallback = tracked
                continue
            return self._picked(tracked)
        return self._picked(fallback) if fallback is not None else None

    @staticmethod
    def _picked(tracked: TrackedRequest) -> tuple[TrackedRequest, int]:
        held: _Waiting = tracked.payload  # type: ignore[assignment]
        tracked.cached_len = held.lens[held.room]
        return tracked, held.room

    def _mark_stale(self, prefixes: set[bytes]) -> None:
        """Held requests whose prompt starts with one of ``prefixes`` (packed) must be looked up again."""
        key_bytes = _PREFIX_KEY_TOKENS * PACKED_TOKEN_BYTES
        for prefix in prefixes:
            if len(prefix) == key_bytes:  # a look-alike family: found by its key
                for rid in self.by_key.get(hash(prefix), ()):
                    tracked = self.tracked[rid]
                    tracked.payload.stale = True  # type: ignore[union-attr]
                    self._reorder(tracked.client)
                continue
            for reqs in self.waiting.values():  # a short path: any held prompt may start with it
                for tracked in reqs.values():
                    held: _Waiting = tracked.payload  # type: ignore[assignment]
                    if held.match.packed.startswith(prefix):
                        held.stale = True
                        self._reorder(tracked.client)

    def _reorder(self, client: str) -> None:
        """``client``'s candidates or what ranks them changed: rank them again when next asked."""
        self._ranked.pop(client, None)

    def _ranked_for(self, client: str, reqs: dict[str, TrackedRequest], worker: int) -> list[tuple]:
        """``client``'s candidates in placement order for ``worker``: most cached there, then least
        lost by going there, then oldest (``(key..., request)`` tuples, kept until ``_reorder``)."""
        by_worker = self._ranked.setdefault(client, {})
        ranked = by_worker.get(worker)
        if ranked is None:
            index, n = self.index, self.num_workers
            ranked = []
            for tracked in itertools.islice(reqs.values(), self.candidates_per_client):
                held: _Waiting = tracked.payload  # type: ignore[assignment]
                if held.stale:
                    held.rank_by(index.refresh(held.match, touch=False), n)
                cached = held.lens[worker]
                ranked.append((-cached, held.length - cached, tracked.seq, tracked))
            ranked.sort()
            by_worker[worker] = ranked
        return ranked

    def _positive_clients(self, only: set[str] | None = None) -> list[tuple[str, dict[str, TrackedRequest]]]:
        deficits = self.fair.policy.deficits  # type: ignore[attr-defined]
        return [(client, reqs) for client, reqs in self.waiting.items()
                if deficits.get(client, 0.0) > 0 and (only is None or client in only)]

    def _best_room(self, held: _Waiting, rooms: list[int]) -> int:
        """The room caching most of the prompt, then the least loaded."""
        load, local_tokens, lens = self.load, self.local_tokens, held.lens
        return max(rooms, key=lambda w: (lens[w], -load[w], -local_tokens[w], -w))

    def _rebalanced(self, held: _Waiting, best: int, rooms: list[int]) -> int:
        """Preble's rebalance: the worker caching most is skipped when its work in
        flight exceeds ``affinity_ratio`` x the lightest worker's plus the prefill the
        lightest would add; else a shared template would pull every request to the
        few workers that cache it."""
        if self.affinity_ratio is None or self._computes_prefix(held, best):
            return best
        load, we, n, lens = self.load, self.input_weight, len(held.tokens), held.lens
        light = min(rooms, key=lambda w: (load[w] + we * (n - lens[w]), w))
        if load[best] > self.affinity_ratio * load[light] + we * (lens[best] - lens[light]):
            return light
        return best

    def _computes_prefix(self, held: _Waiting, worker: int) -> bool:
        """``worker`` computes a long prefix of this prompt for another request: more than a
        local queue's tokens with its next batch (``_pending_shared_tokens``), or in the chunks it
        is prefilling (``prefilling``). The locality rules count that request's prefill as load
        to escape, but sent elsewhere this request would compute the same tokens again, and wait
        about as long for them. Shorter prefixes are cheaper to compute again than a room left
        idle while the request waits (measured on Tree-of-Thoughts)."""
        return (self._pending_shared_tokens(held, worker) > self.local_queue_tokens
                or self._shares_prompt(held, self.prefilling[worker].values()))

    def _live_holders(self, held: _Waiting, worker: int) -> list[int]:
        """The live workers caching most of the prompt, when ``worker`` caches less of it
        (empty without the affinity rule, or when the match is not most of the prompt)."""
        if self.affinity_ratio is None:
            return []
        if held.length <= held.lens[worker] or 2 * held.length <= len(held.tokens):
            return []
        return [h for h in range(self.num_workers) if held.holders >> h & 1 and self.alive[h]]

    def _belongs_elsewhere(self, held: _Waiting, worker: int, holders: list[int]) -> bool:
        """Most of the prompt is cached on another worker (``holders``, from ``_live_holders``)
        whose extra load is smaller than the prefill it would cost to recompute here, or which is
        computing that prefix for another request now (``_computes_prefix``): leave the request
        for that worker (Preble's exploit rule, priced in the same service units). Only
        requests DLPM would dispatch now are passed over, so this costs idle time, never fairness."""
        if not holders or self.affinity_ratio is None:
            return False
        if any(self._computes_prefix(held, h) for h in holders):
            return True
        recompute = self.input_weight * (held.length - held.lens[worker])
        return min(self.load[h] for h in holders) <= self.affinity_ratio * self.load[worker] + recompute

    def _shares_pending_prefill(self, held: _Waiting, worker: int) -> bool:
        """The request waiting in ``worker``'s local queue will compute a prefix of this
        prompt with the worker's next batch: wait for its admission. Sent now, both
        would most likely share that batch, where SGLang computes the prefix once per
        request (its own scheduler only sorts such requests last); sent after, this
        one finds it cached. Only while that request is alone in the local queue and
        the worker has a free running slot (when ``worker_max_running`` is known), so
        that the wait ends with the next batch: a longer one can outlast the prefill it
        saves, and a held request with a positive deficit blocks every refill meanwhile.
        Like the locality wait it passes over requests without charging or refilling."""
        return self._pending_shared_tokens(held, worker) >= SHARED_PREFILL_MIN_TOKENS

    def _pending_shared_tokens(self, held: _Waiting, worker: int) -> int:
        """Tokens of this prompt that the request alone in ``worker``'s local queue will compute
        with the worker's next batch (under ``_shares_pending_prefill``'s conditions), else 0."""
        local = self.local[worker]
        if len(local) != 1 or not self.wait_for_shared_prefill:
            return 0
        if self._free_slots(worker) == 0:
            return 0
        sent = self._sent.get(next(iter(local)))
        if sent is None or sent[0] != held.key:
            return 0
        return common_prefix_len(held.match.packed, sent[1]) - sent[2]

    def _note_long_prefill(self, rid: str, worker: int, cached_tokens: int | None) -> None:
        """Remember a prompt just admitted on ``worker`` whose uncached part exceeds one chunk."""
        sent = self._sent.get(rid)
        if self.worker_chunk_tokens is None or sent is None:
            return
        key, packed, _ = sent
        uncached = (self.local[worker][rid] if cached_tokens is None
                    else len(packed) // PACKED_TOKEN_BYTES - int(cached_tokens))
        if uncached > self.worker_chunk_tokens:
            self.prefilling[worker][rid] = (key, packed)

    def _prefill_bound(self, rooms: list[int]) -> dict[int, Iterable[tuple[int, bytes]]]:
        """The rooms whose worker is prefilling a prompt of several chunks, with those prompts.

        SGLang gives every prefill batch to the unfinished chunked prompt first, so
        until its last chunk nothing else is admitted there: a request sent to that
        local queue waits out the whole prefill while other workers may take it at
        once, and if its client's deficit is positive it blocks every refill (and the
        other workers' next dispatch) meanwhile. Such a room takes only requests that
        share the prompt being prefilled: they hit its cache once it is done.
        """
        return {w: self.prefilling[w].values() for w in rooms if self.prefilling[w]}

    @staticmethod
    def _shares_prompt(held: _Waiting, prompts: Iterable[tuple[int, bytes]]) -> bool:
        return any(key == held.key and common_prefix_len(held.match.packed, packed) >= SHARED_PREFILL_MIN_TOKENS
                   for key, packed in prompts)

    def _dispatch(self, tracked: TrackedRequest, worker: int) -> None:
        held: _Waiting = tracked.payload  # type: ignore[assignment]
        self._unhold(tracked)
        match = self.index.refresh(held.match)  # current: the charge is what this worker really lacks
        cached = match.cached_len(worker)
        if self.observer is not None:
            self.observer.dispatched(held.rid, worker, cached, self.clock())
        self.fair.admit(tracked, cached)
        # Until a worker admits it, the request still waits: its client counts as
        # queued, so CHECKREFILL cannot refill others past a client stuck in a local queue.
        self.fair.hold_downstream(tracked.client)
        self._record(held.rid, held.client, worker, len(held.tokens))
        if self.lanes is not None:
            self.lanes.dispatched(held.rid, held.client, worker, len(held.tokens) + held.max_new)
        uncached = len(held.tokens) - cached
        self.local[worker][held.rid] = uncached
        self._max_new[held.rid] = held.max_new
        if self.wait_for_shared_prefill or self.worker_chunk_tokens is not None:
            self._sent[held.rid] = (held.key, match.packed, cached)
        work = self.input_weight * uncached + self.output_weight * held.max_new
        self._work[held.rid] = work
        self.load[worker] += work
        self.local_tokens[worker] += uncached
        self.index.insert(held.tokens, worker, after=match)
        for rid in self.by_key.get(held.key, ()):  # look-alikes may now match longer on ``worker``
            sibling = self.tracked[rid]
            if sibling.payload.sibling_placed(match.packed, worker):  # type: ignore[union-attr]
                self._reorder(sibling.client)
        tracked.payload = None  # placed: the prompt is the worker's now, not the router's to keep
        self._released.append((held.rid, worker))

    def _unhold(self, tracked: TrackedRequest) -> None:
        held: _Waiting = tracked.payload  # type: ignore[assignment]
        reqs = self.waiting[tracked.client]
        del reqs[held.rid]
        if not reqs:
            del self.waiting[tracked.client]
        self._reorder(tracked.client)
        same = self.by_key[held.key]
        same.discard(held.rid)
        if not same:
            del self.by_key[held.key]

    def _leave_local(self, rid: str, worker: int) -> None:
        tokens = self.local[worker].pop(rid, None)
        if tokens is not None:
            self._sent.pop(rid, None)
            self.local_tokens[worker] -= tokens
            tracked = self.tracked.get(rid)
            if tracked is not None:
                self.fair.release_downstream(tracked.client)

    def _collect_idle(self) -> None:
        # The cluster DLPM forgets idle clients itself; a sweep at most once a second.
        now = self.clock()
        if now >= self._next_gc:
            self._next_gc = now + 1.0
            self.fair.collect_idle()
