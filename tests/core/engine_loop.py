"""A minimal continuous-batching loop that drives FairScheduler like a real engine.

Test support only (the real engines are SGLang and sglang_fair.sim). Each step:
one admission pass (walk candidates, admit while the KV budget has room, stop
at the first that does not fit, as SGLang does), then one decode token for
every running request. A request's KV reservation is its input plus its full
output. Each client's requests share a per-client prefix; a prefix stays cached
while the client has a request running or was served in the last step, so LPM
order and prefix-aware costs have something to work with.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_fair.core import FairOptions, FairScheduler, RequestState, TrackedRequest


@dataclass
class Spec:
    client: str
    input_len: int
    output_len: int
    prefix_len: int


@dataclass
class LoopStats:
    # service[client][step] = ledger service after that step
    service: dict[str, list[float]] = field(default_factory=dict)
    backlogged: dict[str, list[bool]] = field(default_factory=dict)
    # Passes that ended with a queued request fitting the leftover budget.
    work_conservation_violations: int = 0
    admitted: int = 0
    # Latency isolation (FairOptions.isolation): preemptions, and admissions of starved clients' requests.
    preemptions: int = 0
    starved_admitted: int = 0


class EngineLoop:
    def __init__(self, options: FairOptions, kv_capacity: int, seed: int = 0) -> None:
        self.fair = FairScheduler(options, clock=self._now)
        self.capacity = kv_capacity
        self.used = 0
        self.step_no = 0
        self.running: list[tuple[TrackedRequest, Spec]] = []
        self.specs: dict[str, Spec] = {}
        self.cached_prefix: set[str] = set()
        self.rng = random.Random(seed)
        self._rid = 0
        self.stats = LoopStats()
        self.full = False  # the last pass stopped on the KV budget

    def _now(self) -> float:
        return float(self.step_no)

    def submit(self, spec: Spec) -> TrackedRequest:
        self._rid += 1
        rid = f"r{self._rid}"
        self.specs[rid] = spec
        return self.fair.enqueue(rid, spec.client, spec.input_len)

    def queued(self) -> list[TrackedRequest]:
        return [t for t in self.fair.requests.values() if t.state is RequestState.QUEUED]

    def _cached(self, req: TrackedRequest) -> int:
        spec = self.specs[req.rid]
        return spec.prefix_len if spec.client in self.cached_prefix else 0

    def _size(self, req: TrackedRequest) -> int:
        spec = self.specs[req.rid]
        return spec.input_len - self._cached(req) + spec.output_len

    def keep_backlogged(self, make_spec: Callable[[str], Spec], clients: list[str], depth: int) -> None:
        """Top each client's queue up to ``depth`` requests (between steps, as arrivals are).

        Pick ``depth`` above what one step can admit, so that the queue never
        empties: the clients are then continuously backlogged.
        """
        counts = {c: 0 for c in clients}
        for req in self.queued():
            if req.client in counts:
                counts[req.client] += 1
        for client, have in counts.items():
            for _ in range(depth - have):
                self.submit(make_spec(client))

    def step(self) -> None:
        queue = self.queued()
        for req in queue:
            req.cached_len = self._cached(req)
        stopped_on_budget = False
        # Latency isolation, as the engines do it: starved clients are offered
        # room first, and a pass that starts full preempts for them.
        isolation = self.fair.isolation
        starved = isolation.starved_clients() if isolation is not None else set()
        for req in self.fair.walk(self.fair.order(queue), starved):
            size = self._size(req)
            while starved and self.full and self.used + size > self.capacity:
                victim = isolation.next_victim(req, [r for r, _ in self.running])
                if victim is None:
                    break
                self._preempt(victim)
            if self.used + size > self.capacity:
                stopped_on_budget = True
                break
            self.used += size
            self.stats.starved_admitted += req.client in starved
            self.fair.admit(req, self._cached(req))
            self.running.append((req, self.specs[req.rid]))
            self.stats.admitted += 1
        self.full = stopped_on_budget
        if not stopped_on_budget:
            room = self.capacity - self.used
            if any(r.state is RequestState.QUEUED and self._size(r) <= room for r in queue):
                self.stats.work_conservation_violations += 1
        # Decode: one token per running request.
        still = []
        served_clients = set()
        for req, spec in self.running:
            produced = req.output_charged + 1
            self.fair.produced(req, produced)
            served_clients.add(spec.client)
            if produced >= spec.output_len:
                self.fair.finish(req)
                self.used -= spec.input_len - req.cached_len + spec.output_len
            else:
                still.append((req, spec))
        self.running = still
        self.cached_prefix = served_clients | {s.client for _, s in self.running}
        self.step_no += 1
        self._record()

    def _preempt(self, victim: TrackedRequest) -> None:
        spec = self.specs[victim.rid]
        self.used -= spec.input_len - victim.cached_len + spec.output_len
        self.running = [(r, s) for r, s in self.running if r is not victim]
        self.fair.preempt(victim)
        self.stats.preemptions += 1

    def _record(self) -> None:
        backlog = {}
        for req in self.queued():
            backlog[req.client] = True
        for client in set(self.stats.service) | set(self.fair.activity):
            served = self.fair.ledger.get(client)
            self.stats.service.setdefault(client, [0.0] * (self.step_no - 1)).append(
                served.service if served else (self.stats.service.get(client) or [0.0])[-1]
            )
            self.stats.backlogged.setdefault(client, [False] * (self.step_no - 1)).append(backlog.get(client, False))


def max_pairwise_gap(stats: LoopStats, clients: list[str], start: int, end: int) -> float:
    """Largest |W_f(t1,t2) - W_g(t1,t2)| over all t1 < t2 in [start, end)."""
    worst = 0.0
    for i, f in enumerate(clients):
        for g in clients[i + 1 :]:
            diff = [stats.service[f][t] - stats.service[g][t] for t in range(start, end)]
            # max over t1<t2 of |d(t2) - d(t1)| = max(d) - min(d)
            worst = max(worst, max(diff) - min(diff))
    return worst
