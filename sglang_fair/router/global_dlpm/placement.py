"""One placement pass: the order DLPM's walk reads the candidates in, each for its best open room,
and the first candidate it yields that no locality rule leaves for another worker or a later batch."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sglang_fair.core.requests import TrackedRequest
from sglang_fair.router.global_dlpm.held import HeldRequest, HeldRequests, Ranked
from sglang_fair.router.global_dlpm.locality import LocalityPass, LocalityRules, OverShare
from sglang_fair.router.global_dlpm.order import InOrder
from sglang_fair.router.global_dlpm.prefill_waits import Prompt, PrefillWaits, shares_prompt
from sglang_fair.router.lanes import LaneView
from sglang_fair.router.radix_index import RadixIndex

Clients = list[tuple[str, dict[str, HeldRequest]]]  # the clients that may go, with their held requests
SETTLE_AT = 16  # changed candidates a pass that does not read the workers' lists leaves for a later one


@dataclass
class PlacementPass:
    rooms: list[int]  # the workers with room in their local queue (or the place kept for newcomers)
    held: HeldRequests
    index: RadixIndex
    locality: LocalityRules
    waits: PrefillWaits
    over_share: OverShare
    lanes: LaneView | None  # None: no lanes
    bound: dict[int, Iterable[Prompt]] = field(init=False)  # rooms prefilling a long prompt

    def __post_init__(self) -> None:
        self.bound = self.waits.bound(self.rooms)

    def order(self, clients: Clients) -> InOrder:
        cap = self.held.candidates
        n = sum(min(len(reqs), cap) for _, reqs in clients)
        if self.bound or self.lanes is not None or n <= len(self.rooms) or 8 * n * n <= len(self.held):
            # Few of the held requests may go (a newcomer's, or little is held): ranking n
            # candidates costs some 8x more each than reading one in the workers' lists, where
            # the first of n lies about len(held) / n in. The lists are brought up to date
            # only when many changes wait (so that no later pass pays for all of them).
            self.held.settle(self.index, unless_fewer_than=SETTLE_AT)
            return InOrder.of(list(self._ranked(clients)))
        # A backlog is placed one freed room at a time: the candidates are ranked for each worker
        # already, except those that came or changed since the last pass.
        self.held.settle(self.index)
        positive = {client for client, _ in clients}
        if len(self.rooms) == 1:
            room = self.rooms[0]
            return InOrder.in_room(self.held.ranked_for(room), room, positive)
        return InOrder(self._best_first(positive))

    def _best_first(self, positive: set[str]) -> Iterator[Ranked]:
        """``_ranked``'s order over several rooms, with each candidate's room chosen only when the
        walk reads that far.

        Merged, the workers' lists give each candidate first at its key in the room caching most
        of it, the best key it can have. Preble's rebalance may send it to a room caching less,
        a later key: then it waits among the ``moved`` until its turn."""
        rooms = self.rooms
        merged = heapq.merge(*(self.held.ranked_for(w) for w in rooms))
        seen: set[HeldRequest] = set()
        moved: list[Ranked] = []
        for item in merged:
            held = item[-1]
            if held.tracked.client not in positive or held in seen:
                continue
            seen.add(held)
            while moved and moved[0] < item:
                yield heapq.heappop(moved)
            held.room = self._room_among(held, rooms)
            ranked = held.ranked(held.lens[held.room])
            if ranked[0] == item[0]:
                yield ranked
            else:
                heapq.heappush(moved, ranked)
        while moved:
            yield heapq.heappop(moved)

    def _ranked(self, clients: Clients) -> Iterator[Ranked]:
        """Each candidate ranked for its best room among those it may take."""
        rooms, bound, lanes = self.rooms, self.bound, self.lanes
        for client, reqs in clients:
            for held in self.held.candidates_of(reqs, self.index):
                open_rooms = rooms
                if bound:
                    open_rooms = [w for w in rooms if w not in bound or shares_prompt(held, bound[w])]
                if lanes is not None and open_rooms:
                    open_rooms = lanes.rooms_for(client, len(held.tokens) + held.max_new, open_rooms)
                if not open_rooms:
                    continue
                held.room = open_rooms[0] if len(open_rooms) == 1 else self._room_among(held, open_rooms)
                yield held.ranked(held.lens[held.room])

    def _room_among(self, held: HeldRequest, rooms: list[int]) -> int:
        """The room caching most of the prompt, unless Preble's rebalance moves it to a lighter one;
        never for a client over its share: its cache room is as free to it as the lighter one
        (asked only when the rule would move it)."""
        best = self.locality.best_room(held, rooms)
        lighter = self.locality.rebalanced(held, best, rooms)
        return lighter if lighter != best and held.tracked.client not in self.over_share else best

    def first(self, walk: Iterator[TrackedRequest]) -> HeldRequest | None:
        """The first of DLPM's candidates (``walk``) that no rule passes over."""
        by_rid, lanes, locality = self.held.by_rid, self.lanes, self.locality
        rules = LocalityPass(locality) if lanes is None else None
        fallback = None
        for tracked in walk:
            held = by_rid[tracked.rid]
            if rules is not None:
                passed_over, holders = rules.passed_over(held)
                if passed_over:
                    continue
            else:
                holders = lanes.holders_for(tracked.client, locality.live_holders(held, held.room))
                if locality.belongs_elsewhere(held, held.room, holders) or self.waits.shares_pending(held, held.room):
                    continue
            # A client over its share would recompute here what another worker caches: another
            # candidate takes the room if one may (else this one: no room idles for it).
            if holders and tracked.client in self.over_share:
                fallback = fallback or held
                continue
            return held
        return fallback
