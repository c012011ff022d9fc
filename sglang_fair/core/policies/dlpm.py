"""Deficit Longest Prefix Match (DLPM paper, Algorithm 1).

Candidates are walked in LPM order. A request is admitted only while its
client's deficit ``q`` is positive; admission costs ``w_e * extend`` and each
generated token ``w_q``. When a candidate's client has ``q <= 0``, CHECKREFILL
runs: only if *every* client with queued requests has ``q <= 0`` does each
known client with ``q <= 0`` get ``Q^u`` more. A new client starts at 0
(with latency isolation, at ``Q^u``: see ``_first_deficit``).

Two deliberate details, both within the algorithm:
* Refill happens only on the real counters during the admission walk, never
  while merely ordering (a tentative walk that refills lets the heaviest
  client's counter grow without bound).
* The walk is repeated while it makes progress and skipped requests remain
  (Algorithm 1's ``while not Queue.empty()``), so a request that fits is not
  left waiting merely because its client was skipped before another client's
  deficit ran out: the policy is work-conserving. Repeated refills needed
  before any queued client becomes positive are applied in one step, exactly
  as that many CHECKREFILL calls would.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from sglang_fair.core.policies.base import Policy, longest_prefix_first
from sglang_fair.core.requests import RequestState, TrackedRequest


class DLPMPolicy(Policy):
    name = "dlpm"
    cache_aware = True
    default_cost = "prefix-aware"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.deficits: dict[str, float] = {}
        self.quantum = float(self.options.quantum)
        self.refills = 0  # number of CHECKREFILL rounds applied (metrics)
        # A queued client with a positive deficit seen by the last failed
        # CHECKREFILL; while it stays so, refill stays impossible (O(1) check).
        self._blocker: str | None = None

    def order(self, queue: list[TrackedRequest]) -> list[TrackedRequest]:
        return sorted(queue, key=longest_prefix_first)

    def on_enqueue(self, client: str, first_in_queue: bool) -> None:
        if client not in self.deficits:
            self.deficits[client] = self._first_deficit()

    def _first_deficit(self) -> float:
        """A new client starts at 0 (Algorithm 1). With latency isolation it starts with one
        quantum, as a client known at the last CHECKREFILL would hold: otherwise it waits,
        however light, until every backlogged client's deficit is spent, which beside a
        flood is most of a round. Deficits stay within (-U, Q^u], the range the bound rests on."""
        return self.quantum if self.options.isolation else 0.0

    def charge(self, client: str, amount: float) -> None:
        self.deficits[client] = self.deficits.get(client, 0.0) - amount

    def counter(self, client: str) -> float | None:
        return self.deficits.get(client)

    def forget(self, client: str) -> None:
        self.deficits.pop(client, None)

    def settings_changed(self) -> None:
        self.quantum = float(self.options.quantum)  # the next CHECKREFILL refills by the new Q^u

    def check_refill(self) -> bool:
        """CHECKREFILL: refill if no queued client has a positive deficit.

        Returns whether a refill happened. Applies as many rounds as it takes
        for some queued client to become positive.
        """
        blocker = self._blocker
        if blocker is not None:
            act = self.activity.get(blocker)
            if act is not None and act.queued > 0 and self.deficits.get(blocker, 0.0) > 0:
                return False
        rounds_needed = None
        for client, act in self.activity.items():
            if act.queued > 0:
                q = self.deficits.get(client, 0.0)
                if q > 0:
                    self._blocker = client
                    return False
                need = self._rounds_to_positive(q)
                rounds_needed = need if rounds_needed is None else min(rounds_needed, need)
        if rounds_needed is None:
            return False
        for client, q in self.deficits.items():
            if q <= 0:
                self.deficits[client] = q + self.quantum * min(rounds_needed, self._rounds_to_positive(q))
        self.refills += rounds_needed
        self._blocker = None
        return True

    def _rounds_to_positive(self, q: float) -> int:
        return math.floor(-q / self.quantum) + 1

    def walk(self, ordered: list[TrackedRequest]) -> Iterator[TrackedRequest]:
        while True:
            admitted_any = skipped_any = False
            for req in ordered:
                if req.state is not RequestState.QUEUED:
                    continue
                if self.deficits.get(req.client, 0.0) <= 0:
                    self.check_refill()
                if self.deficits.get(req.client, 0.0) <= 0:
                    skipped_any = True
                    continue
                yield req
                if req.state is not RequestState.QUEUED:
                    admitted_any = True
            if not (skipped_any and admitted_any):
                return
