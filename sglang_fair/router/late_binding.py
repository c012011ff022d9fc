"""The frame of a router that holds requests and places them when its rule lets one go.

The peers that put fairness in front of placement (a gateway's flow control,
Dynamo's policy queue) all have this shape: a request arrives into a
per-client queue (``HeldQueues``); whenever something changes (an arrival,
an admission, a first token, a completion, a worker's death) the router asks
its rule for the next (request, worker) pair (``_next``) until the rule says
none may go; a placed request is recorded, inserted into the prefix index
under its worker and tracked through the workers' reports (``Placements``).
A subclass supplies ``_next`` and, where its rule keeps state, the hooks
``_arrived``, ``_placing``, ``_withdrawn`` and ``forget_client``.
"""

from __future__ import annotations

import itertools
from abc import abstractmethod
from collections.abc import Sequence

from sglang_fair.router.base import HOLD_REASONS, Dispatch, RouterSnapshot
from sglang_fair.router.held import Held, HeldQueues
from sglang_fair.router.indexed import IndexedRouter
from sglang_fair.router.placed import Placements
from sglang_fair.router.releases import Releases


class LateBindingRouter(IndexedRouter):
    holds_requests = True

    def __init__(self, num_workers: int, index_capacity_tokens: int, idle_timeout_s: float) -> None:
        super().__init__(num_workers, index_capacity_tokens, idle_timeout_s)
        self.held = HeldQueues()
        self.placements = Placements(num_workers)
        self.releases = Releases()
        self._seq = itertools.count()

    # ---- the rule -----------------------------------------------------------------

    @abstractmethod
    def _next(self) -> tuple[Held, int] | None:
        """The held request to place now and its worker, or None while the rule holds them all."""

    def _arrived(self, held: Held) -> None:
        """``held`` just arrived, before it joins its client's queue."""

    def _placing(self, held: Held, worker: int, cached: int) -> None:
        """``held`` goes to ``worker``, which caches ``cached`` tokens of its prompt."""

    def _withdrawn(self, held: Held) -> None:
        """The client abandoned ``held`` while the router held it."""

    # ---- requests in --------------------------------------------------------------

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int | None:
        self.live_workers()  # NoLiveWorkerError before anything is recorded
        if rid in self.held or rid in self.inflight:
            raise ValueError(f"router {self.name}: request id {rid!r} is already in flight")
        held = Held(rid, client, tokens, int(max_new_tokens), next(self._seq), self.index.match(tokens))
        self._arrived(held)
        self.held.add(held)
        self._pump()
        return self.releases.claim(rid)

    def take_released(self) -> list[tuple[str, int]]:
        return self.releases.take()

    def cancel(self, rid: str) -> bool:
        held = self.held.remove(rid)
        if held is None:
            return False
        self._withdrawn(held)
        return True

    # ---- feedback -----------------------------------------------------------------

    def on_admitted(self, rid: str, worker: int, cached_tokens: int | None = None) -> None:
        if self.placements.admitted(rid, cached_tokens):
            self._pump()

    def on_progress(self, rid: str, worker: int, output_tokens: int) -> None:
        if self.placements.progress(rid, output_tokens):
            self._pump()

    def on_finish(self, rid: str, worker: int, output_tokens: int) -> None:
        super().on_finish(rid, worker, output_tokens)
        self._pump()

    def _finished(self, rid: str, dispatch: Dispatch, output_tokens: int) -> None:
        self.placements.finished(rid)

    def on_worker_down(self, worker: int) -> list[str]:
        lost = super().on_worker_down(worker)
        self.placements.drop_worker(worker)
        if not self._live:  # nobody can ever run the held requests: hand them back to be failed
            held = [h.rid for h in self.held]
            for rid in held:
                self.cancel(rid)
            return lost + held
        self._pump()
        return lost

    def snapshot(self) -> RouterSnapshot:
        state = super().snapshot()
        state.held_requests = len(self.held)
        for client in self.held.clients():
            state.held_by_client[client] = {self._hold_reason(client): self.held.count(client)}
        return state

    def _hold_reason(self, client: str) -> str:
        """Why ``client``'s requests wait (one of ``HOLD_REASONS``): by default, no worker may take one."""
        return HOLD_REASONS[0]

    # ---- placement ----------------------------------------------------------------

    def _pump(self) -> None:
        while len(self.held):
            picked = self._next()
            if picked is None:
                return
            self._place(*picked)

    def _place(self, held: Held, worker: int) -> None:
        self.held.remove(held.rid)
        match = self.index.refresh(held.match)
        cached = match.cached_len(worker)
        self._placing(held, worker, cached)
        self._record(held.rid, held.client, worker, len(held.tokens))
        self.placements.placed(held.rid, worker, len(held.tokens), len(held.tokens) - cached)
        self.index.insert(held.tokens, worker, after=match)
        self.releases.add(held.rid, worker)
