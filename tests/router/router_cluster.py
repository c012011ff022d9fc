"""A tiny deterministic multi-worker loop for router fairness tests.

D workers, each running the project's FairScheduler (local DLPM by default)
with at most ``batch`` running requests; every step each running request
produces one token. A worker caches a prompt's shared prefix once it ran a
request with it (no eviction). Clients are closed-loop: each keeps
``outstanding`` requests in flight (its own ``ClientSpec.outstanding`` if
set), sending the next when one finishes. Service per client per step is
what the local schedulers charge, i.e. what the workers really computed.

Late-binding routers are driven as their contract says: held requests are
sent when ``take_released`` names them, admissions and progress are
reported. ``backlogged``, when given, receives per client and step whether
the client had a request waiting for admission anywhere (in the router or a
worker's queue) throughout the step: the papers' notion of backlog.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sglang_fair.core.fair_scheduler import FairScheduler
from sglang_fair.core.options import FairOptions
from sglang_fair.router.base import Router


@dataclass
class ClientSpec:
    name: str
    prefix_group: int | None  # None: no shared prefix
    prefix_len: int
    suffix_len: tuple[int, int]  # inclusive range
    output_len: tuple[int, int]
    outstanding: int | None = None  # requests kept in flight; None: run_cluster's default


@dataclass
class _Req:
    rid: str
    client: str
    tokens: list[int]
    group: int | None
    prefix_len: int
    output_len: int
    produced: int = 0
    tracked: object = None


@dataclass
class _Worker:
    sched: FairScheduler
    queue: list = field(default_factory=list)
    running: list = field(default_factory=list)
    groups: set = field(default_factory=set)


def run_cluster(
    router: Router,
    clients: list[ClientSpec],
    steps: int,
    seed: int = 0,
    batch: int = 4,
    outstanding: int = 48,
    local_quantum: float = 256.0,
    backlogged: dict[str, list[bool]] | None = None,
    local_policy: str = "dlpm",
) -> dict[str, list[float]]:
    """Return each client's cumulative service after every step."""
    rng = random.Random(seed)
    workers = [
        _Worker(FairScheduler(FairOptions(policy=local_policy, quantum=local_quantum, cost="prefix-aware"),
                              clock=lambda: 0.0))
        for _ in range(router.num_workers)
    ]
    inflight = {c.name: 0 for c in clients}
    served = {c.name: 0.0 for c in clients}
    cumulative: dict[str, list[float]] = {c.name: [] for c in clients}
    counter = iter(range(10**9))
    held: dict[str, _Req] = {}  # rid -> request a late-binding router has not placed yet

    def deliver(req: _Req, w: int) -> None:
        req.tracked = workers[w].sched.enqueue(req.rid, req.client, len(req.tokens), payload=req)
        workers[w].queue.append(req.tracked)

    def release() -> None:
        for rid, w in router.take_released():
            deliver(held.pop(rid), w)

    def submit(spec: ClientSpec) -> None:
        n = next(counter)
        prefix = [] if spec.prefix_group is None else list(range(spec.prefix_group * 10_000, spec.prefix_group * 10_000 + spec.prefix_len))
        suffix = [10**7 + n * 1000 + i for i in range(rng.randint(*spec.suffix_len))]
        req = _Req(f"r{n}", spec.name, prefix + suffix, spec.prefix_group, len(prefix), rng.randint(*spec.output_len))
        w = router.route(req.rid, spec.name, req.tokens, req.output_len)
        if w is None:
            held[req.rid] = req
        else:
            deliver(req, w)
        release()
        inflight[spec.name] += 1

    for _ in range(steps):
        for spec in clients:
            while inflight[spec.name] < (spec.outstanding or outstanding):
                submit(spec)
        for w, worker in enumerate(workers):
            sched = worker.sched
            for t in worker.queue:
                t.cached_len = t.payload.prefix_len if t.payload.group in worker.groups else 0
            for t in sched.walk(sched.order(worker.queue)):
                if len(worker.running) >= batch:
                    break
                served[t.client] += sched.admit(t, t.cached_len)
                worker.running.append(t)
                if t.payload.group is not None:
                    worker.groups.add(t.payload.group)
            worker.queue = [t for t in worker.queue if t not in worker.running]
            for t in worker.running:
                if t.payload.produced == 0:
                    router.on_admitted(t.rid, w, t.cached_len)
            release()
            still = []
            for t in worker.running:
                req = t.payload
                req.produced += 1
                served[t.client] += sched.produced(t, req.produced)
                if req.produced >= req.output_len:
                    sched.finish(t)
                    router.on_finish(req.rid, w, req.produced)
                    inflight[t.client] -= 1
                else:
                    router.on_progress(req.rid, w, req.produced)
                    still.append(t)
            release()
            worker.running = still
        for name, total in served.items():
            cumulative[name].append(total)
        if backlogged is not None:
            _sample_backlog(clients, held, workers, backlogged)
    return cumulative


def _sample_backlog(clients: list[ClientSpec], held: dict[str, _Req], workers: list[_Worker],
                    backlogged: dict[str, list[bool]]) -> None:
    # Sampled at the end of a step: requests arrive only at a step's start, so a
    # client still waiting now waited throughout the step (from after its arrivals).
    waiting = {r.client for r in held.values()}
    waiting.update(t.client for worker in workers for t in worker.queue)
    for spec in clients:
        backlogged.setdefault(spec.name, []).append(spec.name in waiting)


def max_backlogged_gap(a: list[float], b: list[float], busy_a: list[bool], busy_b: list[bool]) -> float:
    """max |W_a(t1, t2) - W_b(t1, t2)| over step intervals in which both were backlogged throughout."""
    best, start = 0.0, None
    for t in range(len(a) + 1):
        both = t < len(a) and busy_a[t] and busy_b[t]
        if both and start is None:
            start = t
        elif not both and start is not None:
            # Service in steps start..t-1 is measured from the totals just before ``start``;
            # within the run the largest |D(t2) - D(t1)| is max(D) - min(D).
            diff = [(a[start - 1] - b[start - 1]) if start else 0.0]
            diff += [x - y for x, y in zip(a[start:t], b[start:t])]
            best = max(best, max(diff) - min(diff))
            start = None
    return best


def max_interval_gap(a: list[float], b: list[float]) -> float:
    """max over t1 < t2 of |(a(t2)-a(t1)) - (b(t2)-b(t1))|, in O(T)."""
    diff = [0.0] + [x - y for x, y in zip(a, b)]
    best = 0.0
    lo = hi = diff[0]
    for d in diff[1:]:
        best = max(best, d - lo, hi - d)
        lo, hi = min(lo, d), max(hi, d)
    return best
