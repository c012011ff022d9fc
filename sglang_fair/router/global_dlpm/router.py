"""``GlobalDLPMRouter``: the cluster's one DLPM over the held requests, composing the package's managers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Protocol

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.options import SettingsUpdate
from sglang_fair.core.requests import TrackedRequest
from sglang_fair.router.base import Dispatch, RouterSnapshot
from sglang_fair.router.global_dlpm.held import PREFIX_KEY_TOKENS, HeldRequest, HeldRequests, prefix_key
from sglang_fair.router.global_dlpm.hold_reasons import hold_reasons
from sglang_fair.router.global_dlpm.local_queues import LocalQueues
from sglang_fair.router.global_dlpm.locality import LocalityRules, OverShare
from sglang_fair.router.global_dlpm.options import GlobalDLPMOptions
from sglang_fair.router.global_dlpm.placement import PlacementPass
from sglang_fair.router.global_dlpm.prefill_waits import PrefillWaits
from sglang_fair.router.indexed import IndexedRouter
from sglang_fair.router.lanes import Lanes
from sglang_fair.router.radix_index import pack
from sglang_fair.router.releases import Releases


class PlacementObserver(Protocol):
    """What ``GlobalDLPMRouter`` tells an observer (``router.observer``), at its clock's time ``t``."""

    def routed(self, rid: str, client: str, tokens: int, cached_anywhere: int, t: float) -> None:
        """A request arrived; ``cached_anywhere``: its longest prefix cached on any worker."""

    def dispatched(self, rid: str, worker: int, cached_there: int, t: float) -> None:
        """It was placed on ``worker``, which caches ``cached_there`` of its tokens."""

    def pumped(self, held: dict[str, str], t: float) -> None:
        """After each placement round: the requests still held and why (``hold_reasons``)."""


class GlobalDLPMRouter(IndexedRouter):
    name = "d2lpm_global"
    holds_requests = True
    follows_policy_quantum = True  # its DLPM is the cluster's: Q is the workers' Q^u unless set for the router
    options_type = GlobalDLPMOptions

    def __init__(self, num_workers: int, options: GlobalDLPMOptions | None = None) -> None:
        self.options = o = options or GlobalDLPMOptions()
        super().__init__(num_workers, o.index_capacity_tokens, o.idle_timeout_s)
        # The cluster's one DLPM: "queued" = held here, "running" = dispatched and not finished;
        # its clock is the router's (virtual in the simulator). With the kept place, a client new
        # to the router starts with one quantum, as the workers' DLPM does under --fair-isolation:
        # at 0 it would wait, place or not, until every held client's deficit is spent.
        self.fair = FairScheduler(
            FairOptions(policy="dlpm", quantum=o.quantum, input_weight=o.input_weight, output_weight=o.output_weight,
                        cost="prefix-aware", client_weights=dict(o.client_weights), idle_timeout_s=o.idle_timeout_s,
                        isolation=o.reserve_for_newcomers),
            clock=lambda: self.clock(),
        )
        self.held = HeldRequests(num_workers, o.candidates_per_client)
        self.queues = LocalQueues(o, self.queue_sizes, self.alive)
        self.waits = PrefillWaits(o, self.queues)
        self.locality = LocalityRules(o, self.queues, self.waits)
        # Workers kept light for the clients under their share (``lanes.py``); None: no lanes.
        self.lanes = Lanes(num_workers, o.lane_workers, o.lane_tokens, o.lane_hold_s) if o.lane_workers else None
        self.tracked: dict[str, TrackedRequest] = {}  # every request the router holds or has placed
        self.releases = Releases()
        self._next_gc = 0.0
        self.observer: PlacementObserver | None = None  # e.g. a study of why requests wait here
        self.index.watch_removals(PREFIX_KEY_TOKENS)

    # ---- requests in ------------------------------------------------------------

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int | None:
        self.live_workers()  # NoLiveWorkerError before anything is recorded
        if rid in self.tracked:
            raise ValueError(f"router {self.name}: request id {rid!r} is already in flight")
        self._collect_idle()
        match = self.index.match(tokens)
        if self.observer is not None:
            self.observer.routed(rid, client, len(tokens), match.length, self.clock())
        tracked = self.tracked[rid] = self.fair.enqueue(rid, client, len(tokens))
        held = HeldRequest(tracked, client, tokens, int(max_new_tokens), match, prefix_key(match.packed))
        held.rank_by(match, self.num_workers)
        self.held.add(held)
        self._pump()
        return self.releases.claim(rid)

    def take_released(self) -> list[tuple[str, int]]:
        return self.releases.take()

    def cancel(self, rid: str) -> bool:
        held = self.held.by_rid.get(rid)
        if held is None:
            return False
        self.held.remove(held)
        self.fair.finish(held.tracked)
        del self.tracked[rid]
        return True

    # ---- feedback ---------------------------------------------------------------

    def on_cached(self, worker: int, tokens: Sequence[int]) -> None:
        super().on_cached(worker, tokens)  # may lengthen held requests' matches
        self.held.mark_stale({pack(tokens[:PREFIX_KEY_TOKENS]): -1})  # any match may lengthen, even none

    def on_admitted(self, rid: str, worker: int, cached_tokens: int | None = None) -> None:
        dispatch = self.inflight.get(rid)
        if dispatch is None or rid not in self.queues.local[dispatch.worker]:
            return  # unknown, or a re-admission after a retraction
        self.waits.admitted(rid, dispatch.worker, cached_tokens)
        self._leave_local(rid, dispatch.worker)
        self.queues.note_finishing(rid, dispatch.worker, 0)
        if cached_tokens is not None:  # what the worker really computed, not what the index believed
            self.fair.correct_admission(self.tracked[rid], int(cached_tokens))
        self._pump()

    def on_progress(self, rid: str, worker: int, output_tokens: int) -> None:
        tracked = self.tracked.get(rid)
        if tracked is not None and rid in self.inflight:
            self.fair.produced(tracked, int(output_tokens))
            if rid not in self.queues.local[worker] and self.queues.note_finishing(rid, worker, int(output_tokens)):
                self._pump()  # its slot is about to free: its successor may go now
            if output_tokens > 0 and self.waits.first_token(rid, worker):
                self._pump()  # the worker's batches take other prompts again

    def on_finish(self, rid: str, worker: int, output_tokens: int) -> None:
        super().on_finish(rid, worker, output_tokens)
        self._pump()

    def _finished(self, rid: str, dispatch: Dispatch, output_tokens: int) -> None:
        self._leave_local(rid, dispatch.worker)
        self.queues.finished(rid, dispatch.worker)
        self.waits.first_token(rid, dispatch.worker)
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
            held = list(self.held.by_rid)
            for rid in held:
                self.cancel(rid)
            lost += held
        else:
            self._pump()
        return lost

    def snapshot(self) -> RouterSnapshot:
        state = super().snapshot()
        state.held_requests = len(self.held)
        counter = self.fair.counter
        state.client_deficits = {c: q for c in self.fair.activity if (q := counter(c)) is not None}
        for held, why in self._hold_reasons():
            reasons = state.held_by_client.setdefault(held.tracked.client, {})
            reasons[why] = reasons.get(why, 0) + 1
        return state

    def update_settings(self, update: SettingsUpdate) -> None:
        # Throttle limits are the workers' (FairServe refuses arrivals there); the router's DLPM takes the rest.
        self.fair.update_settings(dataclasses.replace(update, throttle={}))

    def hold_reasons(self) -> dict[str, str]:
        """Why each held request is still here (``hold_reasons.hold_reasons``), by request id."""
        return {held.rid: why for held, why in self._hold_reasons()}

    def _hold_reasons(self) -> Iterator[tuple[HeldRequest, str]]:
        return hold_reasons(self.held, self.queues, self.fair, self.options.reserve_for_newcomers)

    # ---- placement --------------------------------------------------------------

    def _pump(self) -> None:
        """Place held requests while some worker has room (each placement may fill one)."""
        queues = self.queues
        while self.held:
            rooms = queues.rooms()
            newcomers = None
            if not rooms and self.options.reserve_for_newcomers:
                newcomers = {c for c in self.held.by_client if self.fair.activity[c].running == 0}
                rooms = queues.newcomer_rooms() if newcomers else []
            picked = self._pick(rooms, newcomers) if rooms else None
            if picked is None:
                break
            self._dispatch(picked)
        if self.observer is not None:
            self.observer.pumped(self.hold_reasons(), self.clock())

    def _pick(self, rooms: list[int], only_clients: set[str] | None) -> HeldRequest | None:
        """DLPM's first candidate no locality rule leaves for later, its room set (``placement.py``);
        None if none may go."""
        # DLPM's walk yields only clients with a positive deficit, and CHECKREFILL cannot refill
        # while one is queued: rank those clients' requests only. With none held, the walk's
        # first step is CHECKREFILL; done here, it shows at once whether anything may go (a
        # client positive in a local queue blocks the refill: then nothing is ranked).
        clients = self._positive_clients(only_clients)
        if not clients and self.fair.refill():
            clients = self._positive_clients(only_clients)
        self.held.mark_stale(self.index.take_removals())
        lanes = (None if self.lanes is None
                 else self.lanes.view(self.fair.activity, self.fair.options.weight_of, self.clock(), self.alive, rooms))
        placement = PlacementPass(rooms, self.held, self.index, self.locality, self.waits,
                                  OverShare(self.fair, self.options.affinity_ratio is not None), lanes)
        return placement.first(self.fair.walk(placement.order(clients)))

    def _positive_clients(self, only: set[str] | None) -> list[tuple[str, dict[str, HeldRequest]]]:
        counter = self.fair.policy.counter  # FairScheduler.counter's, one call less per held client
        return [(client, reqs) for client, reqs in self.held.by_client.items()
                if (counter(client) or 0.0) > 0 and (only is None or client in only)]

    def _dispatch(self, held: HeldRequest) -> None:
        worker, tracked = held.room, held.tracked
        self.held.remove(held)
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
        self.queues.dispatched(held.rid, worker, len(held.tokens) - cached, held.max_new)
        self.waits.dispatched(held.rid, held.key, match.packed, cached)
        self.index.insert(held.tokens, worker, after=match)
        self.held.placed(held.key, match.packed, worker)
        self.releases.add(held.rid, worker)

    def _leave_local(self, rid: str, worker: int) -> None:
        if self.queues.leave(rid, worker):
            self.waits.left_local(rid)
            tracked = self.tracked.get(rid)
            if tracked is not None:
                self.fair.release_downstream(tracked.client)

    def _collect_idle(self) -> None:
        # The cluster DLPM forgets idle clients itself; a sweep at most once a second.
        now = self.clock()
        if now >= self._next_gc:
            self._next_gc = now + 1.0
            self.fair.collect_idle()
