"""The interface every data-parallel router implements, whatever the backend.

A backend (SGLang's DP controller, the simulator) calls ``route`` once per
request, in arrival order, and feeds back what the workers report
asynchronously: completions and cache evictions. A router never blocks and
never raises on stale or unknown feedback (a worker may report a request the
router no longer knows, after a restart).

The base class keeps the bookkeeping every router shares: which requests are
in flight on which worker (so ``on_finish`` can decrement the right queue even
if the backend reports a different worker), which workers are alive, and
which clients are idle: a client with nothing in flight for
``idle_timeout_s`` is forgotten (``forget_client``), so per-client state stays
bounded by the clients active recently. ``clock`` is ``time.monotonic``; a
backend in virtual time (the simulator) replaces it.

Late binding (``holds_requests``): a router may keep a request instead of
placing it at once (``route`` returns None) and place it later, when a worker
has room; the backend then collects the placements with ``take_released``
after every call into the router, and reports each request's admission
(``on_admitted``) and output progress (``on_progress``) so the router knows
when a worker has room again and what each client has received. A request the
client abandons while the router still holds it is withdrawn with ``cancel``.
Routers that place every request at once ignore these calls.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from sglang_fair.core.options import SettingsUpdate
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S, IdleClients
from sglang_fair.router.radix_index import RadixIndex

logger = logging.getLogger(__name__)


class NoLiveWorkerError(RuntimeError):
    """Every worker is down: the request cannot be routed."""


@dataclass
class Dispatch:
    """A request routed and not yet finished."""

    client: str
    worker: int
    input_len: int


# Why a late-binding router still holds a request: every local queue is full; its client's
# deficit is spent; others went first.
HOLD_REASONS = ("no room", "deficit", "passed over")


@dataclass
class RouterSnapshot:
    """What an operator watches of a router; the SGLang binding exports it as metrics."""

    inflight: list[int]  # requests dispatched and not finished, per worker
    alive: list[bool]
    cached_tokens: list[int] | None = None  # per worker, as the prefix index believes (routers with one)
    deficits: dict[str, list[float]] = field(default_factory=dict)  # D²LPM's q_{i,w}, per client
    held_requests: int = 0  # waiting in the router for a worker with room (late-binding routers)
    client_deficits: dict[str, float] = field(default_factory=dict)  # one cluster-wide counter per client
    # client -> why its held requests wait (late-binding routers' hold_reasons) -> how many
    held_by_client: dict[str, dict[str, int]] = field(default_factory=dict)


class Router(ABC):
    name: str
    index: RadixIndex | None = None  # the global prefix index, for routers that keep one
    holds_requests: bool = False  # True: ``route`` may return None and place the request later
    # True: the router's ``quantum`` is the cluster's Q^u, so it defaults to the policy's --fair-quantum.
    follows_policy_quantum: bool = False
    # A frozen dataclass holding every option, validated once, for routers built from one:
    # ``make_router`` then calls ``cls(num_workers, options_type(**options))``.
    options_type: ClassVar[type | None] = None

    @classmethod
    def option_defaults(cls) -> dict[str, object]:
        """Each option the router takes, with its default (``inspect.Parameter.empty``: none)."""
        if cls.options_type is not None:
            return {f.name: (f.default if f.default is not dataclasses.MISSING
                             else f.default_factory() if f.default_factory is not dataclasses.MISSING
                             else inspect.Parameter.empty)
                    for f in dataclasses.fields(cls.options_type)}
        params = inspect.signature(cls.__init__).parameters
        return {name: p.default for name, p in params.items() if name not in ("self", "num_workers")}

    def __init__(self, num_workers: int, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> None:
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"a router needs at least one worker, got {num_workers!r}")
        self.num_workers = num_workers
        # Requests dispatched and not yet finished, per worker (s_w in Algorithm 2).
        self.queue_sizes = [0] * num_workers
        self.alive = [True] * num_workers
        self._live = tuple(range(num_workers))  # alive workers, ascending; changes only in on_worker_down
        self.inflight: dict[str, Dispatch] = {}
        self.clients = IdleClients(idle_timeout_s)
        self.clock: Callable[[], float] = time.monotonic

    @abstractmethod
    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int | None:
        """Choose the worker for a new request and record the dispatch.

        None (only where ``holds_requests``): the router keeps the request and
        places it later, through ``take_released``.
        """

    def take_released(self) -> list[tuple[str, int]]:
        """Held requests placed since the last call, as (rid, worker), in dispatch order.

        Backends call it after every ``route``, ``on_admitted``, ``on_finish``,
        ``cancel`` and ``on_worker_down`` and send each request to its worker.
        """
        return []

    def on_admitted(self, rid: str, worker: int, cached_tokens: int | None = None) -> None:
        """``worker`` moved ``rid`` from its waiting queue into a batch (first admission),
        finding ``cached_tokens`` of its prompt in its cache (None: not reported)."""

    def on_progress(self, rid: str, worker: int, output_tokens: int) -> None:
        """``rid`` has generated ``output_tokens`` tokens so far on ``worker`` (cumulative)."""

    def cancel(self, rid: str) -> bool:
        """The client abandoned ``rid``: True if the router still held it (the backend
        answers it and must not expect a completion); False if it was placed."""
        return False

    def on_finish(self, rid: str, worker: int, output_tokens: int) -> None:
        """A request finished (or was aborted) on ``worker``.

        Unknown rids (finished twice, or dispatched by a previous router) are
        ignored with a debug log: feedback is advisory, never fatal.
        """
        dispatch = self.inflight.pop(rid, None)
        if dispatch is None:
            logger.debug("router %s: completion of unknown request %r ignored", self.name, rid)
            return
        self.queue_sizes[dispatch.worker] -= 1
        self._finished(rid, dispatch, max(0, int(output_tokens)))
        self.clients.finished(dispatch.client, self.clock())

    def snapshot(self) -> RouterSnapshot:
        cached = list(self.index.worker_tokens) if self.index is not None else None
        return RouterSnapshot(list(self.queue_sizes), list(self.alive), cached)

    def on_cached(self, worker: int, tokens: Sequence[int]) -> None:
        """``worker`` now caches the prefix ``tokens`` (from KV events)."""

    def on_evicted(self, worker: int, tokens: Sequence[int]) -> None:
        """``worker`` evicted the prefix ``tokens`` from its cache."""

    def on_cache_cleared(self, worker: int) -> None:
        """Nothing is known any more of ``worker``'s cache (flushed, or feedback lost)."""

    def forget_client(self, client: str) -> None:
        """``client`` has been idle for ``idle_timeout_s``: drop its per-client state."""

    def update_settings(self, update: SettingsUpdate) -> None:
        """The operator changed the fair settings at run time (routers that keep a
        cluster-wide fair scheduler apply them; the others have none to change)."""

    def on_worker_down(self, worker: int) -> list[str]:
        """Stop routing to ``worker`` and drop what is known of its cache.

        Returns the rids that were in flight on it; the backend decides whether
        to re-dispatch or fail them (each rid is forgotten here, so a late
        completion from the dead worker is ignored, never counted twice).
        """
        self._check_worker(worker)
        self.alive[worker] = False
        self._live = tuple(w for w in self._live if w != worker)
        lost = [rid for rid, d in self.inflight.items() if d.worker == worker]
        now = self.clock()
        for rid in lost:
            self.clients.finished(self.inflight.pop(rid).client, now)
        self.queue_sizes[worker] = 0
        if self.index is not None:
            self.index.drop_worker(worker)
        return lost

    # ---- helpers for subclasses -------------------------------------------------

    def live_workers(self) -> tuple[int, ...]:
        if not self._live:
            raise NoLiveWorkerError(f"router {self.name}: all {self.num_workers} workers are down")
        return self._live

    def least_loaded(self, workers: Sequence[int]) -> int:
        """The worker with the fewest in-flight requests; ties go to the lowest index."""
        return min(workers, key=self.queue_sizes.__getitem__)

    def _record(self, rid: str, client: str, worker: int, input_len: int) -> int:
        if rid in self.inflight:
            raise ValueError(f"router {self.name}: request id {rid!r} is already in flight")
        self.inflight[rid] = Dispatch(client, worker, input_len)
        self.queue_sizes[worker] += 1
        self.clients.dispatched(client)
        for gone in self.clients.sweep(self.clock()):
            self.forget_client(gone)
        return worker

    def _finished(self, rid: str, dispatch: Dispatch, output_tokens: int) -> None:
        """Hook for routers that charge completions (called once per known rid)."""

    def _check_worker(self, worker: int) -> None:
        if not 0 <= worker < self.num_workers:
            raise ValueError(f"router {self.name}: worker {worker} out of range 0..{self.num_workers - 1}")
