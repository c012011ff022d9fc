"""The waiting queue of one simulated worker and its admission (SGLang's ``PrefillAdder``).

The FairScheduler orders the queue and walks it; each candidate is matched
against the radix cache and admitted if its extend plus its (clipped) future
output fits the token budget, which already reserves ``new_token_ratio`` of
every running request's remaining output; the walk stops at the first
candidate that does not fit (NO_TOKEN marks the batch full until a request
leaves) or when the prefill/chunk budget is spent. Cache-aware orders put a
request that shares an uncached prefix with an earlier one last (SGLang's
in-batch prefix check). A prompt longer than the chunk budget is prefilled in
chunks over several iterations. With mixed chunking the running batch's size
comes off the prefill and chunk budgets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sglang_fair.core import FairScheduler, TrackedRequest
from sglang_fair.sim.worker.config import WorkerConfig, WorkerStats
from sglang_fair.sim.worker.kv_pool import KVPool
from sglang_fair.sim.worker.request import SimRequest
from sglang_fair.sim.worker.running_batch import RunningBatch

# SGLang's IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD and _DEPRIORITIZE_THRESHOLD (both 32).
IN_BATCH_PREFIX_TOKENS = 32


@dataclass
class PrefillBudget:
    """What one admission pass may still take, in tokens (PrefillAdder's rem_*_tokens)."""

    total: int  # free + evictable KV, less what running requests reserve
    input: int  # left of max_prefill_tokens
    chunk: int  # left of chunked_prefill_size


class WaitingQueue:
    def __init__(self, config: WorkerConfig, kv: KVPool, running: RunningBatch, scheduler: FairScheduler,
                 stats: WorkerStats, rng: random.Random, vocab_size: int) -> None:
        self.config = config
        self.kv = kv
        self.running = running
        self.scheduler = scheduler
        self.stats = stats
        self.rng = rng
        self.vocab_size = vocab_size
        self.waiting: list[SimRequest] = []
        self.chunked: SimRequest | None = None  # a prompt prefilled over several iterations

    def refusal(self, req: SimRequest) -> str | None:
        """The policy's arrival check (FairServe's throttle): a reason to refuse ``req``, or None."""
        decision = self.scheduler.check_arrival(req.client, self.kv.usage(), req.app, req.interaction)
        if decision is None:
            return None
        req.retry_after_s = decision.retry_after_s
        return (f"refused by policy (HTTP 429, {decision.reason}): {decision.message}; "
                f"retry after {decision.retry_after_s:.3g} s")

    def enqueue(self, req: SimRequest) -> None:
        # The prompt goes along as in the binding (Justitia predicts demand from it).
        req.tracked = self.scheduler.enqueue(req.rid, req.client, len(req.prompt), payload=req, prompt=req.prompt,
                                             app=req.app, interaction=req.interaction, stage=req.stage)
        self.waiting.append(req)

    def starved(self) -> set[str]:
        isolation = self.scheduler.isolation
        return isolation.starved_clients() if isolation is not None and self.running.reqs else set()

    def admit(self, now: float) -> tuple[list[SimRequest], list[SimRequest]]:
        """One admission pass: the prefill batch (a continuing chunk first), and the requests it admitted."""
        c = self.config
        running = self.running
        # A mixed prefill's decode rows take one token each of both budgets (PrefillAdder's
        # mixed_with_decode_tokens); at least one chunk token is left so a chunked prefill moves on.
        mixed = len(running.reqs) if c.enable_mixed_chunk else 0
        budget = PrefillBudget(total=self.kv.room() - sum(running.reserved(r) for r in running.reqs),
                               input=c.max_prefill_tokens - mixed, chunk=max(c.chunked_prefill_size - mixed, 1))
        batch: list[SimRequest] = []
        if self.chunked is not None:  # a chunked prefill continues first
            self._continue_chunk(batch, budget)
            if self.chunked is not None or budget.chunk <= 0:
                return batch, []
        if not self.waiting:
            return batch, []
        full = running.batch_is_full or len(running.reqs) + len(batch) >= c.max_running_requests
        # Starved clients are offered room first; a pass that starts full preempts for them (core/isolation.py).
        starved = self.starved()
        if full and not starved:
            running.batch_is_full = True
            return batch, []
        admitted = self._walk(self._ordered(), starved, full, batch, budget, now)
        if admitted:
            ids = {id(r) for r in admitted}
            self.waiting = [r for r in self.waiting if id(r) not in ids]
        return batch, admitted

    def _continue_chunk(self, batch: list[SimRequest], budget: PrefillBudget) -> None:
        req = self.chunked
        assert req is not None
        left = len(req.fill()) - req.computed
        take = min(left, budget.chunk)
        req.target = req.computed + take
        batch.append(req)
        budget.total -= take
        budget.input -= take
        budget.chunk -= take
        self.chunked = None if take == left else req

    def _ordered(self) -> list[TrackedRequest]:
        c = self.config
        sched = self.scheduler
        queue = [r.tracked for r in self.waiting]
        if not sched.policy.cache_aware:
            return sched.order(queue)
        if len(queue) <= c.lpm_queue_limit:
            for req in self.waiting:
                req.tracked.cached_len = self.kv.cache.match(req.fill()[:-1]).length
            return self._shared_prefill_last(sched.order(queue))
        return sorted(queue, key=lambda t: t.seq)

    def _walk(self, ordered: list[TrackedRequest], starved: set[str], full: bool, batch: list[SimRequest],
              budget: PrefillBudget, now: float) -> list[SimRequest]:
        """Admit in the scheduler's walk order until a candidate does not fit or a budget is spent."""
        c = self.config
        cache = self.kv.cache
        running = self.running
        admitted: list[SimRequest] = []
        for tracked in self.scheduler.walk(ordered, starved):
            req: SimRequest = tracked.payload
            fill = req.fill()
            # Like SGLang, at least the last token is computed (its logits give the next token).
            m = cache.match(fill[:-1])
            protected_before = cache.protected_size
            cache.lock(m.node)
            budget.total -= cache.protected_size - protected_before
            extend = len(fill) - m.length
            max_new = min(req.max_new - req.out, c.clip_max_new_tokens)
            if full and starved:
                self._make_way(tracked, batch, extend + max_new, budget, now)
            if extend + max_new >= budget.total or len(running.reqs) + len(batch) >= c.max_running_requests:
                cache.unlock(m.node)
                running.batch_is_full = bool(batch) or bool(running.reqs)
                break
            req.node = m.node
            req.computed = m.length
            if req.cached_tokens is None:
                req.cached_tokens = m.length
                req.output_ids = tuple(self.rng.choices(range(self.vocab_size), k=req.max_new))
            else:
                self.stats.recomputed_tokens += extend
            req.admitted_at(now)
            self.scheduler.admit(tracked, m.length)
            admitted.append(req)
            batch.append(req)
            if extend <= budget.chunk:
                req.target = len(fill)
                budget.total -= extend + max_new
            else:  # chunked prefill: this iteration takes what the chunk budget allows
                req.target = m.length + budget.chunk
                self.chunked = req
                budget.total -= budget.chunk
            budget.input -= req.target - m.length
            budget.chunk -= req.target - m.length
            if budget.total <= 0:
                running.batch_is_full = True
                break
            if budget.input <= 0 or budget.chunk <= 0 or len(running.reqs) + len(batch) >= c.max_running_requests:
                break
        return admitted

    def _shared_prefill_last(self, ordered: list[TrackedRequest]) -> list[TrackedRequest]:
        """SGLang's in-batch prefix check (``SchedulePolicy._compute_prefix_matches``):
        walking the queue, a request with at most ``IN_BATCH_PREFIX_TOKENS`` cached
        that shares at least that many leading tokens with an earlier such request
        goes last, so that the two rarely share a prefill batch (in one batch each
        computes the prefix). A shared prefix that long starts with the same
        ``IN_BATCH_PREFIX_TOKENS`` tokens, so comparing those is SGLang's tree match."""
        seen: set[tuple[int, ...]] = set()
        last: set[int] = set()
        for req in self.waiting:
            fill = req.fill()
            if req.tracked.cached_len > IN_BATCH_PREFIX_TOKENS or len(fill) < IN_BATCH_PREFIX_TOKENS:
                continue
            head = fill[:IN_BATCH_PREFIX_TOKENS]
            if head in seen:
                last.add(id(req.tracked))
            else:
                seen.add(head)
        if not last:
            return ordered
        return [t for t in ordered if id(t) not in last] + [t for t in ordered if id(t) in last]

    def _make_way(self, candidate: TrackedRequest, batch: list[SimRequest], need: int, budget: PrefillBudget,
                  now: float) -> None:
        """Preempt running requests for ``candidate`` (latency isolation) until it has a
        slot and ``need`` tokens fit, crediting what they free to ``budget.total``. Preempted
        requests stay preempted even if not enough could be freed (their work is lost then)."""
        isolation = self.scheduler.isolation
        running = self.running
        while need >= budget.total or len(running.reqs) + len(batch) >= self.config.max_running_requests:
            victim = isolation.next_victim(candidate, (r.tracked for r in running.reqs))
            if victim is None:
                break
            req: SimRequest = victim.payload  # type: ignore[assignment]
            before = self.kv.room()
            reserved = running.reserved(req)
            running.preempt(req, victim, now)
            self.waiting.append(req)
            budget.total += self.kv.room() - before + reserved
