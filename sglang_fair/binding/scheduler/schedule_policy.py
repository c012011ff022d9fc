"""``FairSchedulePolicy``: SGLang's ``SchedulePolicy`` with a core FairScheduler inside.

Installed as a class REPLACE of
``sglang.srt.managers.schedule_policy.SchedulePolicy`` (built by
``Scheduler.init_schedule_policy``). For a policy of ours (vtc, dlpm, ...) it
lets SGLang do what it already does well, prefix matching and the LPM sort
(``calc_priority`` with ``lpm`` for cache-aware policies, ``fcfs`` otherwise),
and keeps the fairness state: a ``FairScheduler`` that the scheduler hooks
(``charging``, ``arrival_throttle``, ``prefill_adder``) feed. For SGLang's own
policies (lpm, fcfs, ...) the order and admission stay stock; the
FairScheduler only accounts, so per-client metrics are comparable across
policies.

During an admission pass the policy holds the gate's ``AdmissionPass``
(``admitting``): SGLang calls ``calc_priority`` and builds the adder inside
the pass with no argument that could carry it.
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections.abc import Iterator, Set

from sglang.srt.managers import schedule_policy as _stock_module
from sglang.srt.managers.schedule_policy import SchedulePolicy as _StockSchedulePolicy
from sglang.srt.managers.utils import is_health_check_generate_req

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.applied_hooks import registered, unapplied
from sglang_fair.binding.common.request_identity import decode_identity
from sglang_fair.binding.common.settings import fair_policy_names
from sglang_fair.binding.common.sglang_fields import cached_prefix_len
from sglang_fair.binding.common.version import installed_sglang
from sglang_fair.binding.scheduler.admission_log import AdmissionLog
from sglang_fair.binding.scheduler.admission_pass import AdmissionPass
from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed, AdmissionWalk
from sglang_fair.binding.scheduler.client_metrics import ClientMetricsExport
from sglang_fair.binding.scheduler.rank_clock import shared_clock
from sglang_fair.core.fair_scheduler import FairScheduler
from sglang_fair.core.isolation import DecodeTurns
from sglang_fair.core.policies import POLICIES
from sglang_fair.core.requests import RequestState, TrackedRequest

logger = logging.getLogger(__name__)

# Each policy by the tree cache it sorts for (one scheduler: one cache, one policy). SGLang 0.5.21
# builds its adder by class name from that cache and nothing else of the scheduler's (policy_of_cache).
_POLICY_OF_CACHE: weakref.WeakValueDictionary[int, FairSchedulePolicy] = weakref.WeakValueDictionary()


class FairSchedulePolicy(_StockSchedulePolicy):
    def __init__(self, policy: str, tree_cache, *args, **kwargs) -> None:
        self.fair_policy = policy
        # Our policies gate admission; SGLang's own keep stock behaviour.
        self.gated = policy in fair_policy_names()
        if self.gated:
            base = "lpm" if POLICIES[policy].cache_aware else "fcfs"
            options = settings.load_worker(policy)
        else:
            base = policy
            # Accounting only: the cost weights still matter for metrics.
            options = settings.load_worker("lpm" if policy == "lpm" else "fcfs")
        super().__init__(base, tree_cache, *args, **kwargs)
        # Tensor-parallel ranks must agree, so they read one clock, rank 0's (rank_clock.py).
        self.stamp_clock = shared_clock()
        self.fair = FairScheduler(options, clock=self.stamp_clock or time.monotonic)
        self._admission: AdmissionPass | None = None  # the pass in progress (admitting)
        self._turns: DecodeTurns | None = None  # latency isolation's decode turns, sized at the first pass
        patched = getattr(_stock_module, "SGLANG_FAIR_BUILTIN", False)  # built from patches/
        if self.gated and not patched:
            _check_binding()
        _POLICY_OF_CACHE[id(tree_cache)] = self
        self._next_idle_sweep = 0.0
        self.admission_log = AdmissionLog()  # the rank's admission digest, logged when idle (charging)
        self.client_metrics = ClientMetricsExport()  # this rank's per-client series, if it exports them
        logger.info(
            "sglang-fair: schedule policy %s (%s), quantum=%s, weights in=%s out=%s, cost=%s, isolation=%s, via %s",
            policy,
            "gated" if self.gated else "stock order, accounting only",
            options.quantum,
            options.input_weight,
            options.output_weight,
            self.fair.cost.name,
            f"on (max {options.max_preemptions} preemptions a request)" if options.isolation else "off",
            "the patched SGLang source (patches/)" if patched else "the plugin's hooks",
        )

    # -- the admission pass in progress (admission_gate) ----------------------
    @property
    def admission(self) -> AdmissionPass | None:
        """The admission pass in progress, or None outside one."""
        return self._admission

    @contextlib.contextmanager
    def admitting(self, admission: AdmissionPass) -> Iterator[AdmissionPass]:
        """Hold ``admission`` as the pass in progress while SGLang runs it: SGLang calls
        ``calc_priority`` and builds the adder with no way to hand them the pass. Closed
        on the way out, also when the pass raises."""
        self._admission = admission
        try:
            yield admission
        finally:
            self._admission = None
            admission.close()

    def decode_turns(self, chunk_tokens: int) -> DecodeTurns | None:
        """Latency isolation's decode turns on this rank (None without isolation), built at the first
        pass with the scheduler's chunk size."""
        if self._turns is None and self.fair.isolation is not None:
            self._turns = DecodeTurns(self.fair.isolation, chunk_tokens)
        return self._turns

    @property
    def decode_turns_taken(self) -> int | None:
        """Decode turns this rank has taken (None without isolation)."""
        if self.fair.isolation is None:
            return None
        return self._turns.taken if self._turns is not None else 0

    # -- request tracking (called from the scheduler hooks) --------------------
    def track(self, req) -> TrackedRequest:
        """The tracked view of an SGLang ``Req``; registers it on first sight."""
        tracked = self.fair.requests.get(req.rid)
        if tracked is None:
            who = decode_identity(req.routing_key)
            input_len = len(req.origin_input_ids)
            tracked = self.fair.enqueue(
                req.rid,
                who.charged_client,
                input_len,
                payload=req,
                app=who.app,
                interaction=who.interaction,
                stage=who.stage,
                # The header cannot know the tokenized length: clamp, never refuse here.
                system_len=min(who.system_tokens, input_len),
                prompt=req.origin_input_ids,  # Justitia predicts demand from it (no copy)
            )
        return tracked

    def observe_arrival(self, req) -> None:
        """Under tensor parallelism, before ``req`` is checked: forget the clients idle as of
        rank 0's time, so that every rank forgets each client at the same arrival."""
        if self.stamp_clock is not None:
            self.fair.at_arrival_stamp(self.stamp_clock.now)

    def throttle(self, req, kv_usage: float):
        """FairServe's admission throttle for a newly arrived request (None: admit)."""
        self.observe_arrival(req)
        if req.rid in self.fair.requests or is_health_check_generate_req(req):
            return None  # retracted/preempted (admitted once already) or SGLang's own health check
        who = decode_identity(req.routing_key)
        return self.fair.check_arrival(
            who.charged_client, min(max(kv_usage, 0.0), 1.0), who.app, who.interaction
        )

    def on_queued(self, req) -> None:
        """``req`` was appended to the waiting queue (new, retracted or preempted)."""
        self.observe_arrival(req)
        tracked = self.fair.requests.get(req.rid)
        if tracked is None:
            self.track(req)
        elif tracked.state is RequestState.RUNNING:
            self.fair.requeue(tracked)

    def on_admitted(self, req) -> None:
        tracked = self.track(req)
        if tracked.state is RequestState.QUEUED:
            # The prefix over everything it prefills: a re-admission's output counts as recomputed beyond it.
            self.fair.admit(tracked, cached_prefix_len(req))

    def on_progress(self, req) -> None:
        tracked = self.fair.requests.get(req.rid)
        if tracked is None:
            return
        self.fair.produced(tracked, len(req.output_ids))
        if req.finished():
            self.fair.finish(tracked)

    def forget(self, req) -> None:
        """``req`` leaves the fairness state without being charged further (it was failed)."""
        tracked = self.fair.requests.get(req.rid)
        if tracked is not None:
            self.fair.finish(tracked)

    def sweep_idle_clients(self) -> None:
        """Drop idle clients' state, at most once a second (memory stays bounded; their
        metrics series leave with the next refresh, which writes only known clients)."""
        now = time.monotonic()
        if now >= self._next_idle_sweep:
            self._next_idle_sweep = now + 1.0
            self.fair.collect_idle()

    def reconcile_queue(self, waiting_queue: list) -> None:
        """Bring the tracked queue in line with SGLang's after paths we do not hook.

        Cheap when nothing changed (a count comparison); otherwise O(queue).
        """
        queued = sum(a.queued for a in self.fair.activity.values())
        if queued == len(waiting_queue):
            return
        present = set()
        for req in waiting_queue:
            present.add(req.rid)
            self.on_queued(req)
        for tracked in [t for t in self.fair.requests.values() if t.state is RequestState.QUEUED]:
            if tracked.rid not in present:
                self.fair.finish(tracked)  # left the queue without running: aborted

    def calc_priority(self, waiting_queue: list, *args, **kwargs):
        """SGLang's sort (LPM or FCFS), then, for a gated policy, the start of this pass's walk:
        SGLang's admission loop, which follows, reads the policy's candidates from the queue."""
        result = super().calc_priority(waiting_queue, *args, **kwargs)
        if self.gated:
            admission = self._admission
            sorted_queue = list(waiting_queue)  # the walk moves candidates in the queue, not in this copy
            starved = admission.starved if admission is not None else frozenset()
            walk = AdmissionWalk(waiting_queue, sorted_queue, self.admission_order(sorted_queue, starved))
            # Outside a pass (SGLang's PD-decode and dLLM loops sort the queue themselves) the walk
            # still puts the policy's first candidate first; no fair adder follows it there.
            if admission is not None:
                admission.walk = walk
        return result

    def admission_order(self, sorted_queue: list, starved: Set[str] = frozenset()):
        """Candidates for this pass, as SGLang ``Req`` objects, from the core policy's walk
        (the ``starved`` clients' first, in an isolation pass) over SGLang's sort, or over the
        policy's own order where SGLang has none like it (Justitia's)."""
        queue = _TrackedView(sorted_queue, self.track)
        ordered = queue if self.fair.policy.engine_order else self.fair.order(list(queue))
        for candidate in self.fair.walk(ordered, starved):
            yield candidate.payload


def fair_policy(scheduler) -> FairSchedulePolicy | None:
    """The scheduler's policy when it is ours (sglang-fair built in or hooked), else None."""
    policy = getattr(scheduler, "policy", None)
    return policy if isinstance(policy, FairSchedulePolicy) else None


def policy_of_cache(tree_cache) -> FairSchedulePolicy | None:
    """The fair policy built with ``tree_cache`` (the scheduler's ``tree_cache``), else None."""
    policy = _POLICY_OF_CACHE.get(id(tree_cache))
    # An id outlives its object: only the policy still holding this very cache is its own.
    return policy if policy is not None and policy.tree_cache is tree_cache else None


def _check_binding() -> None:
    """A gated policy relies on every scheduler hook: refuse to start when SGLang could not apply one."""
    # Scheduler's methods, and the adder class on 0.5.21
    missing = unapplied(registered("scheduler", "sglang.srt.managers.scheduler."))
    if missing:
        raise AdmissionBypassed(
            f"sglang-fair: SGLang {installed_sglang()} did not apply the hooks on {', '.join(missing)} "
            "(its log names the error); a fair policy cannot run without them")


class _TrackedView:
    """The waiting queue seen as tracked requests, mapped lazily.

    A DLPM walk usually stops after the few requests that fill the batch, so a
    long queue is not converted in full on every pass.
    """

    __slots__ = ("_queue", "_track")

    def __init__(self, queue: list, track) -> None:
        self._queue = queue
        self._track = track

    def __iter__(self):
        track = self._track
        for req in self._queue:
            yield track(req)

    def __len__(self) -> int:
        return len(self._queue)
