"""One simulated SGLang worker (a DP rank): its scheduler loop in virtual time.

Semantics follow SGLang 0.5.23's default (non-mixed) scheduler:

* each iteration is either a prefill batch or one decode step of the whole
  running batch; a prefill is tried first whenever the queue is not empty and
  the batch is not marked full;
* admission: the FairScheduler orders the queue and walks it; each candidate
  is matched against the radix cache and admitted if its extend plus its
  (clipped) future output fits the token budget, which already reserves
  ``new_token_ratio`` of every running request's remaining output; the walk
  stops at the first candidate that does not fit (NO_TOKEN marks the batch
  full until a request leaves) or when the prefill/chunk budget is spent;
  cache-aware orders put a request that shares an uncached prefix with an
  earlier one last (SGLang's in-batch prefix check);
  a prompt longer than the chunk budget is prefilled in chunks over several
  iterations;
* with ``enable_mixed_chunk`` (SGLang's ``--enable-mixed-chunk``) a prefill
  iteration also decodes the running batch one step (``mix_with_running``);
  the running batch's size comes off the prefill and chunk budgets, and rows
  that find no KV slot sit the step out, as in SGLang;
* decode needs one KV slot per running request per step; when the pool
  (free + evictable cache) runs out, requests are retracted (fewest outputs,
  longest prompt first) back to the queue and ``new_token_ratio`` is raised;
  it decays again on every decode step.

Decode steps run in segments: between two events (a finish, memory running
out, or an arrival the loop would see) every step does the same thing, so a
segment of k steps is timed in closed form and charged with one
``produced`` call per request. A segment can be cut short at the step
boundary after an arrival when the loop would admit it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_fair.core import FairOptions, FairScheduler, TrackedRequest
from sglang_fair.sim.costmodel import CostModel
from sglang_fair.sim.radix import Node, RadixCache


# SGLang's IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD and _DEPRIORITIZE_THRESHOLD (both 32).
IN_BATCH_PREFIX_TOKENS = 32


class SimulationError(RuntimeError):
    """The simulated worker reached a state SGLang could not be in."""


@dataclass
class WorkerConfig:
    kv_pool_tokens: int
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384
    max_running_requests: int = 1024
    clip_max_new_tokens: int = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
    init_new_token_ratio: float = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO
    min_new_token_ratio_factor: float = 0.14
    new_token_ratio_decay_steps: int = 600
    retract_decode_steps: int = 20
    # SGLang's LPM matches and sorts the queue only up to this many waiting
    # requests (WAITING_QUEUE_PREFIX_MATCH_MAX) and is FCFS beyond; the
    # binding keeps SGLang's sort, so cache-aware policies see the same.
    lpm_queue_limit: int = 128
    enable_mixed_chunk: bool = False  # SGLang's --enable-mixed-chunk

    def check(self) -> None:
        for name in ("kv_pool_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
                     "clip_max_new_tokens", "new_token_ratio_decay_steps", "lpm_queue_limit"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"simulator option {name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0 < self.init_new_token_ratio <= 1:
            raise ValueError(f"init_new_token_ratio must be in (0, 1], got {self.init_new_token_ratio!r}")


@dataclass(eq=False)
class SimRequest:
    rid: str
    client: str
    prompt: tuple[int, ...]
    max_new: int
    t_arrival: float
    tag: object = None  # the backend's handle (program, call index)
    # Application identity (FairServe, Justitia): app type, interaction id, call index.
    app: str | None = None
    interaction: str | None = None
    stage: int | None = None
    retry_after_s: float | None = None  # set when the policy refused it
    worker: int | None = None
    out: int = 0  # tokens generated so far
    output_ids: tuple[int, ...] = ()
    cached_tokens: int | None = None  # cache hit at first admission
    t_first_token: float | None = None
    t_done: float | None = None
    tracked: TrackedRequest | None = None
    node: Node | None = None  # locked radix node (prefix protected while running)
    computed: int = 0  # tokens of fill with KV (tree + private) while admitted
    private: int = 0  # KV slots held outside the tree (decode outputs, pending prefill)
    target: int = 0  # fill length this admission prefills to
    # Audit trail for the records (RequestRecord.t_admitted, progress, requeues).
    t_admitted: float | None = None
    progress: list[list[float]] = field(default_factory=list)
    requeues: list[list[float | None]] = field(default_factory=list)

    def admitted_at(self, t: float) -> None:
        if self.t_admitted is None:
            self.t_admitted = t
        elif self.requeues and self.requeues[-1][1] is None:  # back in a batch after a retraction
            self.requeues[-1][1] = t

    def produced_at(self, t: float) -> None:
        self.progress.append([t, self.out])

    def fill(self) -> tuple[int, ...]:
        """What a prefill must cover: prompt plus the outputs kept over a retraction."""
        return self.prompt + self.output_ids[: self.out] if self.out else self.prompt


@dataclass
class _Segment:
    start: float
    steps: int
    batch: int
    ctx0: int
    interruptible: bool


@dataclass
class WorkerStats:
    prefill_batches: int = 0
    decode_steps: int = 0
    decode_tokens: int = 0  # tokens decoded: batch x steps
    # each decoded token's step time, summed, ms: over decode_tokens, the step a running request waits
    # for per token, which grows with the batch it shares
    decode_token_ms: float = 0.0
    retractions: int = 0
    evicted_tokens: int = 0
    prefill_tokens: int = 0  # tokens computed by prefills (extend, chunks, re-prefills)
    preemptions: int = 0  # running requests whose slot latency isolation took
    recomputed_tokens: int = 0  # prefilled again after a retraction or preemption (waste)


@dataclass
class IterationResult:
    end: float
    finished: list[SimRequest] = field(default_factory=list)
    prefilled: list[SimRequest] = field(default_factory=list)  # first token or prompt now cached
    decoded: list[SimRequest] = field(default_factory=list)  # running rows a mixed prefill decoded one step
    start: float = 0.0  # when the iteration began (a mixed row waited from here to ``end``)


class SimWorker:
    def __init__(self, rank: int, config: WorkerConfig, options: FairOptions, cost: CostModel,
                 rng: random.Random, vocab_size: int,
                 on_evict: Callable[[Node], None] | None = None, report_admissions: bool = False) -> None:
        self.rank = rank
        self.config = config
        self.cost = cost
        self.now = 0.0
        self.scheduler = FairScheduler(options, clock=lambda: self.now)
        self.cache = RadixCache(on_evict=self._evicting if on_evict else None)
        self._on_evict = on_evict
        self.rng = rng
        self.vocab_size = vocab_size
        self.waiting: list[SimRequest] = []
        self.running: list[SimRequest] = []
        self.chunked: SimRequest | None = None
        self.batch_is_full = False
        self.private = 0  # KV slots held outside the tree
        c = config
        self.ratio_init = min(c.init_new_token_ratio, 1.0)
        self.ratio_min = self.ratio_init * c.min_new_token_ratio_factor
        self.ratio_decay = (self.ratio_init - self.ratio_min) / c.new_token_ratio_decay_steps
        self.new_token_ratio = self.ratio_init
        self.segment: _Segment | None = None
        self.pending: IterationResult | None = None  # the iteration in flight
        self.stats = WorkerStats()
        # Requests admitted by the last iteration decision, for a router that
        # places requests when workers have room (None: nobody asks).
        self.admitted: list[SimRequest] | None = [] if report_admissions else None

    # -- queue ----------------------------------------------------------------
    def refusal(self, req: SimRequest) -> str | None:
        """The policy's arrival check (FairServe's throttle): a reason to refuse ``req``, or None."""
        pool = self.config.kv_pool_tokens
        # Evictable cache counts as free, as in SGLang's token usage.
        usage = (pool - self.available() - self.cache.evictable_size) / pool
        decision = self.scheduler.check_arrival(req.client, min(max(usage, 0.0), 1.0), req.app, req.interaction)
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

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.chunked)

    def available(self) -> int:
        return self.config.kv_pool_tokens - self.cache.total_size - self.private

    # -- one iteration ----------------------------------------------------------
    def start_iteration(self, now: float) -> float | None:
        """Decide the next iteration at ``now``; returns when it ends (None: idle)."""
        self.now = now
        if not self.running:
            self.batch_is_full = False
        batch = None
        if (self.waiting and (not self.batch_is_full or self._starved())) or self.chunked is not None:
            batch = self._admit()
        if batch:
            ms = self.cost.prefill_ms([(r.target - r.computed, r.computed) for r in batch])
            self._allocate_prefill(batch)
            decoded = self._mix_running()
            if decoded:
                ms += self.cost.mixed_decode_ms(len(decoded), sum(r.computed + r.private for r in decoded))
            self.pending = IterationResult(now + ms / 1000.0, prefilled=batch, decoded=decoded, start=now)
            self.stats.prefill_batches += 1
            return self.pending.end
        if not self.running:
            self.pending = None
            if not self.waiting:
                self.scheduler.collect_idle()
            elif self.chunked is None:
                raise SimulationError(f"worker {self.rank}: {len(self.waiting)} queued requests, none running, "
                                      "and none can be admitted")
            return None
        steps = self._decode_budget()
        if steps == 0:
            self._retract()
            if not self.running:
                return self.start_iteration(now)
            steps = self._decode_budget()
            if steps == 0:
                raise SimulationError(f"worker {self.rank}: one request does not fit the KV pool")
        batch_size = len(self.running)
        ctx0 = sum(r.computed + r.private for r in self.running)
        # A full batch admits no arrival, unless isolation may preempt for it.
        interruptible = not self.batch_is_full or self.scheduler.isolation is not None
        self.segment = _Segment(now, steps, batch_size, ctx0, interruptible)
        self.pending = IterationResult(now + self.cost.decode_steps_ms(batch_size, ctx0, steps) / 1000.0)
        return self.pending.end

    def interrupt(self, at: float) -> float | None:
        """An arrival at ``at``: end a decode segment at the next step boundary.

        Returns the new end time, or None when the iteration is not cut.
        """
        seg = self.segment
        if seg is None or not seg.interruptible or self.pending is None or at >= self.pending.end:
            return None
        d = self.cost.profile.decode
        step0 = (d.a + d.b * seg.batch + d.c * seg.ctx0) / 1000.0
        grow = d.c * seg.batch / 1000.0
        t, k = seg.start, 0
        while t <= at and k < seg.steps:  # boundaries are few hundred at most
            t += step0 + grow * k
            k += 1
        if k >= seg.steps:
            return None
        seg.steps = k
        self.pending.end = t
        return t

    def complete(self) -> IterationResult:
        """Apply the iteration in flight at its end time."""
        result = self.pending
        if result is None:
            raise SimulationError(f"worker {self.rank}: no iteration in flight")
        self.now = result.end
        self.pending = None
        if self.segment is not None:
            self._finish_decode(self.segment, result)
            self.segment = None
        else:
            self._finish_prefill(result)
        return result

    # -- admission --------------------------------------------------------------
    def _admit(self) -> list[SimRequest]:
        c = self.config
        rem_total = self.available() + self.cache.evictable_size - sum(
            int(min(r.max_new - r.out, c.clip_max_new_tokens) * self.new_token_ratio) for r in self.running)
        # A mixed prefill's decode rows take one token each of both budgets (PrefillAdder's
        # mixed_with_decode_tokens); at least one chunk token is left so a chunked prefill moves on.
        mixed = len(self.running) if c.enable_mixed_chunk else 0
        rem_input = c.max_prefill_tokens - mixed
        rem_chunk = max(c.chunked_prefill_size - mixed, 1)
        batch: list[SimRequest] = []
        if self.chunked is not None:  # a chunked prefill continues first
            req = self.chunked
            left = len(req.fill()) - req.computed
            take = min(left, rem_chunk)
            req.target = req.computed + take
            batch.append(req)
            rem_total -= take
            rem_input -= take
            rem_chunk -= take
            self.chunked = None if take == left else req
            if self.chunked is not None or rem_chunk <= 0:
                return batch
        if not self.waiting:
            return batch
        full = self.batch_is_full or len(self.running) + len(batch) >= c.max_running_requests
        # Starved clients are offered room first; a pass that starts full preempts for them (core/isolation.py).
        starved = self._starved()
        if full and not starved:
            self.batch_is_full = True
            return batch
        sched = self.scheduler
        queue = [r.tracked for r in self.waiting]
        if not sched.policy.cache_aware:
            ordered = sched.order(queue)
        elif len(queue) <= c.lpm_queue_limit:
            for req in self.waiting:
                req.tracked.cached_len = self.cache.match(req.fill()[:-1]).length
            ordered = self._shared_prefill_last(sched.order(queue))
        else:
            ordered = sorted(queue, key=lambda t: t.seq)
        admitted: set[int] = set()
        for tracked in sched.walk(ordered, starved):
            req: SimRequest = tracked.payload
            fill = req.fill()
            # Like SGLang, at least the last token is computed (its logits give the next token).
            m = self.cache.match(fill[:-1])
            protected_before = self.cache.protected_size
            self.cache.lock(m.node)
            rem_total -= self.cache.protected_size - protected_before
            extend = len(fill) - m.length
            max_new = min(req.max_new - req.out, c.clip_max_new_tokens)
            if full and starved:
                rem_total = self._make_way(tracked, batch, extend + max_new, rem_total)
            if extend + max_new >= rem_total or len(self.running) + len(batch) >= c.max_running_requests:
                self.cache.unlock(m.node)
                self.batch_is_full = bool(batch) or bool(self.running)
                break
            req.node = m.node
            req.computed = m.length
            if req.cached_tokens is None:
                req.cached_tokens = m.length
                req.output_ids = tuple(self.rng.choices(range(self.vocab_size), k=req.max_new))
            else:
                self.stats.recomputed_tokens += extend
            req.admitted_at(self.now)
            sched.admit(tracked, m.length)
            if self.admitted is not None:
                self.admitted.append(req)
            admitted.add(id(req))
            batch.append(req)
            if extend <= rem_chunk:
                req.target = len(fill)
                rem_total -= extend + max_new
            else:  # chunked prefill: this iteration takes what the chunk budget allows
                req.target = m.length + rem_chunk
                self.chunked = req
                rem_total -= rem_chunk
            rem_input -= req.target - m.length
            rem_chunk -= req.target - m.length
            if rem_total <= 0:
                self.batch_is_full = True
                break
            if rem_input <= 0 or rem_chunk <= 0 or len(self.running) + len(batch) >= c.max_running_requests:
                break
        if admitted:
            self.waiting = [r for r in self.waiting if id(r) not in admitted]
        return batch

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

    def _allocate_prefill(self, batch: list[SimRequest]) -> None:
        need = sum(r.target - r.computed for r in batch)
        self._make_room(need)
        self.private += need
        for r in batch:
            r.private += r.target - r.computed

    def _make_room(self, tokens: int) -> None:
        short = tokens - self.available()
        if short > 0:
            self.stats.evicted_tokens += self.cache.evict(short)
        if tokens > self.available():
            raise SimulationError(f"worker {self.rank}: KV pool overcommitted ({tokens} needed, "
                                  f"{self.available()} free)")

    def _mix_running(self) -> list[SimRequest]:
        """With mixed chunking, the running rows that decode in this prefill iteration (their KV
        slots taken now); none when they do not all fit, as SGLang's ``check_decode_mem``."""
        if not self.config.enable_mixed_chunk or not self.running:
            return []
        if len(self.running) > self.available() + self.cache.evictable_size:
            return []
        self._make_room(len(self.running))
        self.private += len(self.running)
        return list(self.running)

    def _finish_prefill(self, result: IterationResult) -> None:
        if result.decoded:
            self._finish_mixed_decode(result)
        for req in result.prefilled:
            self.stats.prefill_tokens += req.target - req.computed
            self._checkpoint(req, req.fill()[: req.target])
            if req is self.chunked:
                continue
            req.out += 1
            req.produced_at(self.now)
            if req.t_first_token is None:
                req.t_first_token = self.now
            self.scheduler.produced(req.tracked, req.out)
            self.running.append(req)
        done = [r for r in result.prefilled if r is not self.chunked and r.out >= r.max_new]
        for req in done:
            self._finish(req, result)

    def _checkpoint(self, req: SimRequest, tokens: tuple[int, ...]) -> None:
        """Move the request's computed KV into the tree and re-lock its new end."""
        self.cache.insert(tokens)
        new_node = self.cache.match(tokens).node
        self.cache.lock(new_node)
        self.cache.unlock(req.node)
        req.node = new_node
        self.private -= req.private
        req.private = 0
        req.computed = len(tokens)

    # -- decode -------------------------------------------------------------------
    def _decode_budget(self) -> int:
        """Steps the running batch can take before the next event it causes itself."""
        batch = len(self.running)
        to_finish = min(r.max_new - r.out for r in self.running)
        fits = (self.available() + self.cache.evictable_size) // batch
        return max(0, min(to_finish, fits))

    def _finish_decode(self, seg: _Segment, result: IterationResult) -> None:
        k = seg.steps
        self._make_room(seg.batch * k)
        self.private += seg.batch * k
        self.stats.decode_steps += k
        self.stats.decode_tokens += seg.batch * k
        self.stats.decode_token_ms += seg.batch * self.cost.decode_series_ms(seg.batch, seg.ctx0, k)
        self.new_token_ratio = max(self.new_token_ratio - self.ratio_decay * k, self.ratio_min)
        still = []
        for req in self.running:
            req.out += k
            req.produced_at(self.now)
            req.private += k
            self.scheduler.produced(req.tracked, req.out)
            if req.out >= req.max_new:
                result.finished.append(req)
            else:
                still.append(req)
        self.running = still
        for req in result.finished:
            self._finish(req, result, in_running=False)

    def _finish_mixed_decode(self, result: IterationResult) -> None:
        """One decode step of the rows a mixed prefill carried; each waited the whole iteration."""
        rows = result.decoded
        self.stats.decode_steps += 1
        self.stats.decode_tokens += len(rows)
        self.stats.decode_token_ms += len(rows) * (result.end - result.start) * 1000.0
        for req in rows:
            req.out += 1
            req.private += 1
            req.produced_at(self.now)
            self.scheduler.produced(req.tracked, req.out)
        for req in [r for r in rows if r.out >= r.max_new]:
            self._finish(req, result)

    def _finish(self, req: SimRequest, result: IterationResult, in_running: bool = True) -> None:
        # The KV of every token but the last one generated is cached.
        self._checkpoint(req, req.prompt + req.output_ids[: req.out - 1])
        self.cache.unlock(req.node)
        req.node = None
        req.t_done = self.now
        self.scheduler.finish(req.tracked)
        if in_running:
            self.running.remove(req)
            result.finished.append(req)
        self.batch_is_full = False

    def _starved(self) -> set[str]:
        isolation = self.scheduler.isolation
        return isolation.starved_clients() if isolation is not None and self.running else set()

    def _make_way(self, candidate: TrackedRequest, batch: list[SimRequest], need: int, rem_total: int) -> int:
        """Preempt running requests for ``candidate`` (latency isolation) until it has a
        slot and ``need`` tokens fit; returns the new token budget. Preempted requests
        stay preempted even if not enough could be freed (their work is lost then)."""
        isolation = self.scheduler.isolation
        c = self.config
        while need >= rem_total or len(self.running) + len(batch) >= c.max_running_requests:
            victim = isolation.next_victim(candidate, (r.tracked for r in self.running))
            if victim is None:
                break
            req: SimRequest = victim.payload  # type: ignore[assignment]
            before = self.available() + self.cache.evictable_size
            reserved = int(min(req.max_new - req.out, c.clip_max_new_tokens) * self.new_token_ratio)
            self._release(req)
            self.scheduler.preempt(victim)
            self.stats.preemptions += 1
            self.running.remove(req)
            self.waiting.append(req)
            rem_total += self.available() + self.cache.evictable_size - before + reserved
        return rem_total

    def _release(self, req: SimRequest) -> None:
        """Free a running request's KV (outputs are recomputed on re-admission), as SGLang's release_req."""
        self.private -= req.private
        req.private = 0
        self.cache.unlock(req.node)
        req.node = None
        req.computed = 0
        req.requeues.append([self.now, None])

    def _retract(self) -> None:
        """Free decode memory by sending requests back to the queue (SGLang's retract_decode)."""
        order = sorted(self.running, key=lambda r: (r.out, -len(r.prompt)), reverse=True)
        retracted = []
        while order and (not retracted or self.available() + self.cache.evictable_size < len(order)):
            req = order.pop()
            self._release(req)
            self.scheduler.requeue(req.tracked)
            retracted.append(req)
        self.running = order
        self.waiting.extend(retracted)
        self.stats.retractions += len(retracted)
        self.batch_is_full = False
        if order:
            decoded = sum(r.out for r in order)
            self.new_token_ratio = min(1.0, (decoded + self.config.retract_decode_steps * len(order))
                                       / (sum(r.max_new for r in order) + 1))

    def _evicting(self, node: Node) -> None:
        self._on_evict(self.rank, node)  # type: ignore[misc]
