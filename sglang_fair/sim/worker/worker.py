"""``SimWorker``: one simulated SGLang worker (a DP rank), its scheduler loop in virtual time.

It composes one manager per resource: the KV pool and radix cache
(``KVPool``), the waiting queue and admission (``WaitingQueue``), the running
batch and its decode steps (``RunningBatch``) and iteration times
(``StepTimer``); it decides each iteration and reports admissions to a router
that places requests late.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.isolation import DecodeTurns
from sglang_fair.sim.costmodel import CostModel
from sglang_fair.sim.radix import Node, RadixCache
from sglang_fair.sim.worker.config import SimulationError, WorkerConfig, WorkerStats
from sglang_fair.sim.worker.kv_pool import KVPool
from sglang_fair.sim.worker.request import IterationResult, SimRequest
from sglang_fair.sim.worker.running_batch import RunningBatch
from sglang_fair.sim.worker.timing import DecodeSegment, StepTimer
from sglang_fair.sim.worker.waiting_queue import WaitingQueue


class SimWorker:
    def __init__(self, rank: int, config: WorkerConfig, options: FairOptions, cost: CostModel,
                 rng: random.Random, vocab_size: int,
                 on_evict: Callable[[int, Node], None] | None = None, report_admissions: bool = False) -> None:
        self.rank = rank
        self.config = config
        self.cost = cost
        self.now = 0.0
        self.scheduler = FairScheduler(options, clock=lambda: self.now)
        self.stats = WorkerStats()
        self.kv = KVPool(rank, config.kv_pool_tokens, self.stats, on_evict)
        self.batch = RunningBatch(config, self.kv, self.scheduler, self.stats)
        self.queue = WaitingQueue(config, self.kv, self.batch, self.scheduler, self.stats, rng, vocab_size)
        self.timer = StepTimer(cost)
        self.segment: DecodeSegment | None = None  # the decode segment in flight
        self.pending: IterationResult | None = None  # the iteration in flight
        isolation = self.scheduler.isolation
        # Latency isolation's decode turns, a chunk of prefill apart at most (core/isolation.py).
        self.turns = DecodeTurns(isolation, config.chunked_prefill_size) if isolation is not None else None
        # Requests admitted by the last iteration decision, for a router that
        # places requests when workers have room (None: nobody asks).
        self.admitted: list[SimRequest] | None = [] if report_admissions else None

    # What the cluster reads of the managers' state.
    @property
    def cache(self) -> RadixCache:
        return self.kv.cache

    @property
    def private(self) -> int:
        return self.kv.private

    @property
    def waiting(self) -> list[SimRequest]:
        return self.queue.waiting

    @property
    def running(self) -> list[SimRequest]:
        return self.batch.reqs

    @property
    def has_work(self) -> bool:
        return bool(self.queue.waiting or self.batch.reqs or self.queue.chunked)

    def refusal(self, req: SimRequest) -> str | None:
        """The policy's arrival check (FairServe's throttle): a reason to refuse ``req``, or None."""
        return self.queue.refusal(req)

    def enqueue(self, req: SimRequest) -> None:
        self.queue.enqueue(req)

    def start_iteration(self, now: float) -> float | None:
        """Decide the next iteration at ``now``; returns when it ends (None: idle)."""
        self.now = now
        queue, running = self.queue, self.batch
        if not running.reqs:
            running.batch_is_full = False
        batch = None
        decode_turn = self.turns is not None and bool(running.reqs) and self.turns.due()
        if decode_turn:
            self.turns.take()
            self.stats.decode_turns += 1
        if not decode_turn and ((queue.waiting and (not running.batch_is_full or queue.starved()))
                                or queue.chunked is not None):
            batch, admitted = queue.admit(now)
            if self.admitted is not None:
                self.admitted.extend(admitted)
        if batch:
            ms = self.timer.prefill_ms(batch)
            tokens = sum(r.target - r.computed for r in batch)
            self.kv.allocate_prefill(batch)
            decoded = running.mix()
            if self.turns is not None:
                self.turns.after_decode() if decoded else self.turns.after_prefill(tokens)
            self.pending = IterationResult(self.timer.prefill_end(now, ms, decoded), prefilled=batch,
                                           decoded=decoded, start=now)
            self.stats.prefill_batches += 1
            return self.pending.end
        if not running.reqs:
            self.pending = None
            if not queue.waiting:
                self.scheduler.collect_idle()
            elif queue.chunked is None:
                raise SimulationError(f"worker {self.rank}: {len(queue.waiting)} queued requests, none running, "
                                      "and none can be admitted")
            return None
        steps = running.decode_budget()
        if steps == 0:
            queue.waiting.extend(running.retract(now))
            if not running.reqs:
                return self.start_iteration(now)
            steps = running.decode_budget()
            if steps == 0:
                raise SimulationError(f"worker {self.rank}: one request does not fit the KV pool")
        if decode_turn:  # one step, then the queue is looked at again, as SGLang's loop does
            steps = 1
        if self.turns is not None:
            self.turns.after_decode()
        ctx0 = sum(r.computed + r.private for r in running.reqs)
        # A full batch admits no arrival, unless isolation may preempt for it.
        interruptible = not running.batch_is_full or self.scheduler.isolation is not None
        self.segment, end = self.timer.decode_segment(now, steps, len(running.reqs), ctx0, interruptible)
        self.pending = IterationResult(end)
        return self.pending.end

    def interrupt(self, at: float) -> float | None:
        """An arrival at ``at``: end a decode segment at the next step boundary.

        Returns the new end time, or None when the iteration is not cut.
        """
        seg = self.segment
        if seg is None or not seg.interruptible or self.pending is None or at >= self.pending.end:
            return None
        end = self.timer.cut(seg, at)
        if end is not None:
            self.pending.end = end
        return end

    def complete(self) -> IterationResult:
        """Apply the iteration in flight at its end time."""
        result = self.pending
        if result is None:
            raise SimulationError(f"worker {self.rank}: no iteration in flight")
        self.now = result.end
        self.pending = None
        if self.segment is not None:
            self.batch.finish_decode(self.segment, result, self.now, self.timer.token_ms(self.segment))
            self.segment = None
        else:
            self.batch.finish_prefill(result, self.queue.chunked, self.now)
        return result
