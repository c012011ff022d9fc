"""The running batch of one simulated worker: decode steps, finishing, retraction.

Decode needs one KV slot per running request per step; when the pool (free +
evictable cache) runs out, requests are retracted (fewest outputs, longest
prompt first) back to the queue and ``new_token_ratio`` is raised; it decays
again on every decode step. Admission reserves that share of every running
request's remaining output (``reserved``).
"""

from __future__ import annotations

from sglang_fair.core import FairScheduler, TrackedRequest
from sglang_fair.sim.worker.config import WorkerConfig, WorkerStats
from sglang_fair.sim.worker.kv_pool import KVPool
from sglang_fair.sim.worker.request import IterationResult, SimRequest
from sglang_fair.sim.worker.timing import DecodeSegment


class RunningBatch:
    def __init__(self, config: WorkerConfig, kv: KVPool, scheduler: FairScheduler, stats: WorkerStats) -> None:
        self.config = config
        self.kv = kv
        self.scheduler = scheduler
        self.stats = stats
        self.reqs: list[SimRequest] = []
        # NO_TOKEN: admission stops trying until a request leaves (SGLang's batch_is_full).
        self.batch_is_full = False
        c = config
        self.ratio_init = min(c.init_new_token_ratio, 1.0)
        self.ratio_min = self.ratio_init * c.min_new_token_ratio_factor
        self.ratio_decay = (self.ratio_init - self.ratio_min) / c.new_token_ratio_decay_steps
        self.new_token_ratio = self.ratio_init

    def reserved(self, req: SimRequest) -> int:
        """Tokens admission keeps for ``req``'s remaining (clipped) output."""
        return int(min(req.max_new - req.out, self.config.clip_max_new_tokens) * self.new_token_ratio)

    def decode_budget(self) -> int:
        """Steps the running batch can take before the next event it causes itself."""
        batch = len(self.reqs)
        to_finish = min(r.max_new - r.out for r in self.reqs)
        fits = self.kv.room() // batch
        return max(0, min(to_finish, fits))

    def mix(self) -> list[SimRequest]:
        """With mixed chunking, the running rows that decode in this prefill iteration (their KV
        slots taken now); none when they do not all fit, as SGLang's ``check_decode_mem``."""
        if not self.config.enable_mixed_chunk or not self.reqs:
            return []
        if len(self.reqs) > self.kv.room():
            return []
        self.kv.allocate(len(self.reqs))
        return list(self.reqs)

    def finish_prefill(self, result: IterationResult, chunked: SimRequest | None, now: float) -> None:
        """Prefilled requests get their first token and join the batch (a chunk still going does not)."""
        if result.decoded:
            self._finish_mixed_decode(result, now)
        for req in result.prefilled:
            self.stats.prefill_tokens += req.target - req.computed
            self.kv.checkpoint(req, req.fill()[: req.target])
            if req is chunked:
                continue
            req.out += 1
            req.produced_at(now)
            if req.t_first_token is None:
                req.t_first_token = now
            self.scheduler.produced(req.tracked, req.out)
            self.reqs.append(req)
        done = [r for r in result.prefilled if r is not chunked and r.out >= r.max_new]
        for req in done:
            self.finish(req, result, now)

    def finish_decode(self, seg: DecodeSegment, result: IterationResult, now: float, token_ms: float) -> None:
        """Apply a decode segment: ``seg.steps`` tokens per request, charged with one ``produced`` each."""
        k = seg.steps
        self.kv.allocate(seg.batch * k)
        self.stats.decode_steps += k
        self.stats.decode_tokens += seg.batch * k
        self.stats.decode_token_ms += token_ms
        self.new_token_ratio = max(self.new_token_ratio - self.ratio_decay * k, self.ratio_min)
        still = []
        for req in self.reqs:
            req.out += k
            req.produced_at(now)
            req.private += k
            self.scheduler.produced(req.tracked, req.out)
            if req.out >= req.max_new:
                result.finished.append(req)
            else:
                still.append(req)
        self.reqs = still
        for req in result.finished:
            self.finish(req, result, now, in_running=False)

    def _finish_mixed_decode(self, result: IterationResult, now: float) -> None:
        """One decode step of the rows a mixed prefill carried; each waited the whole iteration."""
        rows = result.decoded
        self.stats.decode_steps += 1
        self.stats.decode_tokens += len(rows)
        self.stats.decode_token_ms += len(rows) * (result.end - result.start) * 1000.0
        for req in rows:
            req.out += 1
            req.private += 1
            req.produced_at(now)
            self.scheduler.produced(req.tracked, req.out)
        for req in [r for r in rows if r.out >= r.max_new]:
            self.finish(req, result, now)

    def finish(self, req: SimRequest, result: IterationResult, now: float, in_running: bool = True) -> None:
        # The KV of every token but the last one generated is cached.
        self.kv.retire(req, req.prompt + req.output_ids[: req.out - 1])
        req.t_done = now
        self.scheduler.finish(req.tracked)
        if in_running:
            self.reqs.remove(req)
            result.finished.append(req)
        self.batch_is_full = False

    def preempt(self, req: SimRequest, victim: TrackedRequest, now: float) -> None:
        """Latency isolation takes ``req``'s slot: its KV is freed; the caller queues it again."""
        self.kv.release(req)
        req.requeued_at(now)
        self.scheduler.preempt(victim)
        self.stats.preemptions += 1
        self.reqs.remove(req)

    def retract(self, now: float) -> list[SimRequest]:
        """Free decode memory by taking requests out of the batch (SGLang's retract_decode);
        returns them for the queue."""
        order = sorted(self.reqs, key=lambda r: (r.out, -len(r.prompt)), reverse=True)
        retracted = []
        while order and (not retracted or self.kv.room() < len(order)):
            req = order.pop()
            self.kv.release(req)
            req.requeued_at(now)
            self.scheduler.requeue(req.tracked)
            retracted.append(req)
        self.reqs = order
        self.stats.retractions += len(retracted)
        self.batch_is_full = False
        if order:
            decoded = sum(r.out for r in order)
            self.new_token_ratio = min(1.0, (decoded + self.config.retract_decode_steps * len(order))
                                       / (sum(r.max_new for r in order) + 1))
        return retracted
