"""D simulated workers behind a data-parallel router, in one virtual-time event loop.

Events are processed in (time, phase, sequence) order, so a run is
deterministic: arrivals and iteration ends at time t come first, then idle
workers wake up and decide their next iteration having seen every request
that arrived at t (SGLang drains its input socket before scheduling).
Router feedback (completions, cached and evicted prefixes) can be delayed to
model an asynchronous side channel; a router that does not override a
feedback method is not fed it (building token paths costs time).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_fair.core import FairOptions, checks
from sglang_fair.router.base import Router
from sglang_fair.sim.costmodel import CostModel, load_profile
from sglang_fair.sim.radix import Node
from sglang_fair.sim.worker import SimRequest, SimWorker, WorkerConfig

_NOW, _WAKE = 0, 1  # phases within one instant


@dataclass
class SimConfig:
    num_workers: int = 1
    router: str = "round_robin"
    router_options: dict = field(default_factory=dict)
    profile: str = "h100-llama-3.1-8b"
    kv_pool_tokens: int | None = None  # None: the profile's default for its GPU
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384
    max_running_requests: int = 1024
    lpm_queue_limit: int = 128  # SGLang matches/sorts at most this many waiting requests for LPM
    enable_mixed_chunk: bool = False  # SGLang's --enable-mixed-chunk: prefills carry a decode step
    feedback_delay_s: float = 0.0  # router learns of finishes/cache changes this much later
    vocab_size: int = 32000  # range of the synthesized output token ids

    def check(self) -> None:
        checks.positive_int("num_workers", self.num_workers)
        checks.non_negative_number("feedback_delay_s", self.feedback_delay_s)
        checks.int_at_least("vocab_size", self.vocab_size, 2)


def _overrides(router: Router, method: str) -> bool:
    return getattr(type(router), method) is not getattr(Router, method)


class SimCluster:
    def __init__(self, config: SimConfig, options: FairOptions, seed: int = 0,
                 router_factory: Callable[..., Router] | None = None) -> None:
        config.check()
        self.config = config
        self.profile = load_profile(config.profile)
        self.cost = CostModel(self.profile)
        wc = WorkerConfig(
            kv_pool_tokens=config.kv_pool_tokens or self.profile.kv_pool_tokens,
            chunked_prefill_size=config.chunked_prefill_size,
            max_prefill_tokens=config.max_prefill_tokens,
            max_running_requests=config.max_running_requests,
            lpm_queue_limit=config.lpm_queue_limit,
            enable_mixed_chunk=config.enable_mixed_chunk,
        )
        wc.check()
        self.worker_config = wc
        from sglang_fair.router import WorkerSettings, make_router, with_worker_settings

        # A router that charges tokens prices them as the workers' policy does (and a cluster-wide DLPM
        # takes the workers' quantum), as on the server.
        workers = WorkerSettings(
            input_weight=options.input_weight, output_weight=options.output_weight, quantum=options.quantum,
            client_weights=dict(options.client_weights), isolation=options.isolation,
            max_running_requests=config.max_running_requests,
            mixed_chunk_tokens=config.chunked_prefill_size if config.enable_mixed_chunk else None,
            kv_pool_tokens=wc.kv_pool_tokens, max_prefill_tokens=config.max_prefill_tokens,
            idle_timeout_s=options.idle_timeout_s)
        router_options = with_worker_settings(config.router, config.router_options, workers)
        self.router = (router_factory or make_router)(config.router, config.num_workers, **router_options)
        self.router.clock = lambda: self.now  # idle clients are forgotten in virtual time
        self._feed_cached = _overrides(self.router, "on_cached")
        self._late = self.router.holds_requests
        self._held: dict[str, SimRequest] = {}  # rid -> request the router has not placed yet
        feed_evicted = _overrides(self.router, "on_evicted")
        self.workers = [
            SimWorker(rank, wc, options, self.cost, random.Random(f"{seed}-{rank}"), config.vocab_size,
                      on_evict=self._evicted if feed_evicted else None, report_admissions=self._late)
            for rank in range(config.num_workers)
        ]
        self._events: list[tuple[float, int, int, Callable, tuple]] = []
        self._seq = itertools.count()
        self.now = 0.0

    # -- scheduling of events ------------------------------------------------------
    def at(self, t: float, fn: Callable, *args: object, phase: int = _NOW) -> None:
        heapq.heappush(self._events, (t, phase, next(self._seq), fn, args))

    def submit(self, t: float, req: SimRequest) -> None:
        """``req`` is sent at virtual time ``t``."""
        self.at(t, self._arrive, req)

    def run(self, on_finish: Callable[[SimRequest], None],
            on_refused: Callable[[SimRequest, str], None]) -> None:
        """Process events until none is left; the callbacks may submit more requests."""
        self._on_finish = on_finish
        self._on_refused = on_refused
        events = self._events
        while events:
            t, _, _, fn, args = heapq.heappop(events)
            self.now = t
            fn(*args)

    # -- handlers ------------------------------------------------------------------
    def _arrive(self, req: SimRequest) -> None:
        w = self.router.route(req.rid, req.client, req.prompt, req.max_new)
        if w is None:  # a late-binding router holds it until some worker has room
            self._held[req.rid] = req
        else:
            self._deliver(req, w)
        self._release()

    def _release(self) -> None:
        """Send the requests a late-binding router placed since it was last asked."""
        for rid, w in self.router.take_released():
            self._deliver(self._held.pop(rid), w)

    def _deliver(self, req: SimRequest, w: int) -> None:
        worker = self.workers[w]
        req.worker = w
        worker.now = max(worker.now, self.now)
        refusal = worker.refusal(req)
        if refusal is not None:  # answered at once; the router sees it finish with no output
            self.router.on_finish(req.rid, w, 0)
            self._on_refused(req, refusal)
            return
        worker.enqueue(req)
        if worker.pending is None:
            self.at(self.now, self._wake, worker, phase=_WAKE)
        else:
            end = worker.interrupt(self.now)
            if end is not None:
                self.at(end, self._iteration_end, worker, worker.pending)

    def _wake(self, worker: SimWorker) -> None:
        if worker.pending is not None or not worker.has_work:
            return
        end = worker.start_iteration(self.now)
        if end is not None:
            self.at(end, self._iteration_end, worker, worker.pending)
        if self._late:
            admitted, worker.admitted = worker.admitted, []
            for req in admitted:
                self._feedback(self.config.feedback_delay_s, self.router.on_admitted, req.rid, worker.rank,
                               req.cached_tokens)

    def _iteration_end(self, worker: SimWorker, pending: object) -> None:
        if worker.pending is not pending or pending.end != self.now:  # type: ignore[attr-defined]
            return  # superseded: the segment was cut short
        result = worker.complete()
        delay = self.config.feedback_delay_s
        if self._feed_cached:
            for req in result.prefilled:
                self._feedback(delay, self.router.on_cached, worker.rank, req.fill()[: req.computed])
        if self._late:
            for req in worker.running:
                self._feedback(delay, self.router.on_progress, req.rid, worker.rank, req.out)
        for req in result.finished:
            self._feedback(delay, self.router.on_finish, req.rid, worker.rank, req.out)
            if self._feed_cached:
                self._feedback(delay, self.router.on_cached, worker.rank, req.prompt + req.output_ids[: req.out - 1])
            self._on_finish(req)
        self.at(self.now, self._wake, worker, phase=_WAKE)

    def _feedback(self, delay: float, fn: Callable, *args: object) -> None:
        if delay == 0:
            self._tell(fn, *args)
        else:
            self.at(self.now + delay, self._tell, fn, *args)

    def _tell(self, fn: Callable, *args: object) -> None:
        fn(*args)
        if self._late:  # the news may have made room for a held request
            self._release()

    def _evicted(self, rank: int, node: Node) -> None:
        # Routers read on_evicted(tokens) as "keeps at most tokens[:-1]": pass the
        # path up to the node's first token, since the whole node is gone.
        path = node.path()
        kept = len(path) - len(node.key)
        self._feedback(self.config.feedback_delay_s, self.router.on_evicted, rank, path[: kept + 1])

    def leaks(self) -> list[str]:
        """After a complete run: KV or locks still held, i.e. a simulator bug."""
        out = []
        if self._held:
            out.append(f"router still holds {len(self._held)} requests")
        for w in self.workers:
            if w.has_work or w.private or w.cache.protected_size:
                out.append(f"worker {w.rank} not drained: {len(w.waiting)} queued, {len(w.running)} running, "
                           f"{w.private} private KV tokens, {w.cache.protected_size} locked cache tokens")
        return out

    # -- run facts -----------------------------------------------------------------
    def meta(self) -> dict:
        return {
            "num_workers": self.config.num_workers,
            "router": self.config.router,
            "profile": self.profile.name,
            "kv_pool_tokens": self.worker_config.kv_pool_tokens,
            "feedback_delay_s": self.config.feedback_delay_s,
            "extrapolated": dict(self.cost.extrapolated),
            "workers": [vars(w.stats) | {"rank": w.rank} for w in self.workers],
        }
