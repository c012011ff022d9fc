"""A tiny deterministic multi-worker loop for router fairness tests.

D workers, each running the project's FairScheduler (local DLPM by default)
with at most ``batch`` running requests; every step each running request
produces one token. A worker caches a prompt's shared prefix once it ran a
request with it (no eviction). Clients are closed-loop: each keeps
``outstanding`` requests in flight, so a client with requests is backlogged.
Service per client per step is what the local schedulers charge.
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
) -> dict[str, list[float]]:
    """Return each client's cumulative service after every step."""
    rng = random.Random(seed)
    workers = [
        _Worker(FairScheduler(FairOptions(policy="dlpm", quantum=local_quantum), clock=lambda: 0.0))
        for _ in range(router.num_workers)
    ]
    inflight = {c.name: 0 for c in clients}
    served = {c.name: 0.0 for c in clients}
    cumulative: dict[str, list[float]] = {c.name: [] for c in clients}
    counter = iter(range(10**9))

    def submit(spec: ClientSpec) -> None:
        n = next(counter)
        prefix = [] if spec.prefix_group is None else list(range(spec.prefix_group * 10_000, spec.prefix_group * 10_000 + spec.prefix_len))
        suffix = [10**7 + n * 1000 + i for i in range(rng.randint(*spec.suffix_len))]
        req = _Req(f"r{n}", spec.name, prefix + suffix, spec.prefix_group, len(prefix), rng.randint(*spec.output_len))
        w = router.route(req.rid, spec.name, req.tokens, req.output_len)
        worker = workers[w]
        req.tracked = worker.sched.enqueue(req.rid, spec.name, len(req.tokens), payload=req)
        worker.queue.append(req.tracked)
        inflight[spec.name] += 1

    for _ in range(steps):
        for spec in clients:
            while inflight[spec.name] < outstanding:
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
                    still.append(t)
            worker.running = still
        for name, total in served.items():
            cumulative[name].append(total)
    return cumulative


def max_interval_gap(a: list[float], b: list[float]) -> float:
    """max over t1 < t2 of |(a(t2)-a(t1)) - (b(t2)-b(t1))|, in O(T)."""
    diff = [0.0] + [x - y for x, y in zip(a, b)]
    best = 0.0
    lo = hi = diff[0]
    for d in diff[1:]:
        best = max(best, d - lo, hi - d)
        lo, hi = min(lo, d), max(hi, d)
    return best
