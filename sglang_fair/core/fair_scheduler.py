"""FairScheduler: the one object a backend drives.

It owns the live request table, per-client activity, the service ledger, the
cost function and the policy, and turns engine events into charges:

* ``enqueue`` (new request) / ``requeue`` (retracted or preempted back)
* ``order`` + ``walk`` + ``admit`` (one admission pass)
* ``produced`` (cumulative output count: charges only the new tokens)
* ``finish`` (finished or aborted, from any state)
* ``collect_idle`` (drop clients idle longer than the timeout)

Besides the charges it records each client's latencies (``latency``): queue
time, time to first token and end to end, from arrival in this queue.

Charging rules: the admission cost is charged once per request, at its first
admission, after the engine's cache match (``cached_len``); every output
token is charged exactly once, whatever path produced it. What a re-admitted
request prefills again is recorded as waste (``recomputed_tokens``), not service.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence

from sglang_fair.core.apps import normalize_app_id
from sglang_fair.core.client_latency import LatencyRecord
from sglang_fair.core.costs import Charge, CostFunction, make_cost
from sglang_fair.core.isolation import LatencyIsolation
from sglang_fair.core.ledger import ServiceLedger
from sglang_fair.core.options import FairOptions, SettingsUpdate
from sglang_fair.core.policies import Policy, make_policy
from sglang_fair.core.throttle import ThrottleDecision
from sglang_fair.core.requests import ClientActivity, RequestState, TrackedRequest


class FairScheduler:
    def __init__(self, options: FairOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.clock = clock
        self.activity: dict[str, ClientActivity] = {}
        self.policy: Policy = make_policy(options, self.activity, clock)
        self.cost: CostFunction = make_cost(
            options.cost or self.policy.default_cost, options.input_weight, options.output_weight
        )
        self.ledger = ServiceLedger()
        self.latency = LatencyRecord()
        self.isolation = LatencyIsolation(options, self.activity, self.ledger) if options.isolation else None
        self.requests: dict[str, TrackedRequest] = {}
        self._seq = itertools.count()
        # Every admission, in order: copies of this scheduler that must agree (tensor-parallel
        # ranks) compare the count and digest.
        self.admissions = 0
        self._admission_digest = hashlib.blake2b(digest_size=8)

    # -- queue membership -------------------------------------------------
    def check_arrival(
        self, client: str, kv_usage: float, app: str | None = None, interaction: str | None = None
    ) -> ThrottleDecision | None:
        """Call once per arriving request, before ``enqueue``: a decision means
        refuse it (HTTP 429, Retry-After) and do not enqueue it.

        ``kv_usage``: fraction (0..1) of the KV cache in use right now.
        """
        if not 0.0 <= kv_usage <= 1.0:
            raise ValueError(f"kv_usage must be a fraction in [0, 1], got {kv_usage!r}")
        return self.policy.should_throttle(client, normalize_app_id(app), normalize_app_id(interaction), kv_usage)

    def enqueue(self, rid: str, client: str, input_len: int, payload: object = None, *, app: str | None = None,
                interaction: str | None = None, stage: int | None = None, system_len: int = 0,
                prompt: Sequence[int] | str | None = None) -> TrackedRequest:
        """Register a new request in the waiting queue.

        The keyword fields are the optional application identity (see
        ``TrackedRequest``); policies that do not use them ignore them.
        """
        if rid in self.requests:
            raise ValueError(f"request id {rid!r} is already tracked")
        if stage is not None and (not isinstance(stage, int) or stage < 0):
            raise ValueError(f"interaction stage must be an integer >= 0, got {stage!r}")
        if not isinstance(system_len, int) or not 0 <= system_len <= int(input_len):
            raise ValueError(f"system_len must be an integer in [0, input_len={input_len}], got {system_len!r}")
        now = self.clock()
        req = TrackedRequest(
            rid, client, int(input_len), next(self._seq), now, payload=payload,
            app=normalize_app_id(app), interaction=normalize_app_id(interaction),
            stage=stage, system_len=system_len, prompt=prompt,
        )
        self.policy.on_request(req)
        self.requests[rid] = req
        self._enter_queue(req, now)
        return req

    def requeue(self, req: TrackedRequest) -> None:
        """A running request went back to the queue (retraction, preemption)."""
        if req.state is not RequestState.RUNNING:
            return
        self.activity[req.client].running -= 1
        self._enter_queue(req, self.clock())

    def preempt(self, req: TrackedRequest) -> None:
        """Latency isolation took ``req``'s slot: back to the queue, counted, charged nothing."""
        if req.state is not RequestState.RUNNING:
            raise ValueError(f"request {req.rid!r} is {req.state.value}, not running")
        req.preemptions += 1
        self.ledger.record_preemption(req.client)
        self.requeue(req)

    def _enter_queue(self, req: TrackedRequest, now: float) -> None:
        act = self.activity.get(req.client)
        if act is None:
            act = self.activity[req.client] = ClientActivity()
        first = act.queued == 0
        # Notify before counting, so the policy sees the queue as it was.
        self.policy.on_enqueue(req.client, first)
        act.queued += 1
        act.last_active = now
        req.state = RequestState.QUEUED

    def _leave_queue(self, req: TrackedRequest) -> None:
        act = self.activity[req.client]
        act.queued -= 1
        if act.queued == 0:
            self.policy.on_queue_left(req.client)

    def hold_downstream(self, client: str) -> None:
        """A request admitted here waits on in a queue beyond this scheduler (a worker's local
        queue, under a router): its client counts as queued until ``release_downstream``, so
        a refill cannot pass a client whose request is stuck there."""
        self.activity[client].queued += 1

    def release_downstream(self, client: str) -> None:
        """The queue beyond this scheduler admitted (or dropped) a request ``hold_downstream`` counted."""
        self.activity[client].queued -= 1

    # -- admission ------------------------------------------------------------
    def order(self, queue: list[TrackedRequest]) -> list[TrackedRequest]:
        return self.policy.order(queue)

    def walk(self, ordered: Iterable[TrackedRequest], starved: Collection[str] = ()) -> Iterator[TrackedRequest]:
        """The policy's candidates; with ``starved`` clients (latency isolation), first
        the policy's walk over their requests alone, then over everyone's, so a
        full batch is offered to them before anyone else and no room is left idle."""
        if not starved:
            return self.policy.walk(ordered)
        ordered = list(ordered)
        return itertools.chain(self.policy.walk([r for r in ordered if r.client in starved]), self.policy.walk(ordered))

    def admit(self, req: TrackedRequest, cached_len: int) -> float:
        """``req`` joined the running batch with ``cached_len`` tokens of what it
        prefills (its prompt, plus its earlier output on a re-admission) cached.

        Returns the service charged (0 on re-admission after a retraction or
        preemption, whose prefill is recorded as recomputed instead).
        """
        if req.state is not RequestState.QUEUED:
            raise ValueError(f"request {req.rid!r} is {req.state.value}, not queued")
        self._leave_queue(req)
        self.admissions += 1
        self._admission_digest.update(f"{req.rid}\0{cached_len}\0".encode("utf-8", "surrogatepass"))
        act = self.activity[req.client]
        act.running += 1
        now = act.last_active = self.clock()
        req.state = RequestState.RUNNING
        if req.extend_charged:
            self.ledger.record_recompute(req.client, max(0, req.input_len + req.output_charged - cached_len))
            req.cached_len = min(cached_len, req.input_len)
            return 0.0
        self.latency.admitted(req.client, now - req.arrival)
        cached_len = min(cached_len, req.input_len)
        req.cached_len = cached_len
        req.extend_charged = True
        cost = self.cost.admission(req.input_len, cached_len)
        self.ledger.record_admission(req.client, req.input_len, cached_len, cost)
        self.policy.charge_request(req, Charge(cost, self.options.weight_of(req.client), input_tokens=req.input_len))
        return cost

    def admission_digest(self) -> str:
        """A digest of every admission so far (request and cached tokens, in order)."""
        return self._admission_digest.hexdigest()

    def correct_admission(self, req: TrackedRequest, cached_len: int) -> float:
        """The engine found ``cached_len`` cached where ``admit`` was told otherwise
        (a router charges on its index's belief, before the worker matched):
        charge the difference, a refund when negative, so the total is what
        the engine really computed. Returns the difference."""
        if not req.extend_charged or cached_len == req.cached_len:
            return 0.0
        cached_len = min(max(cached_len, 0), req.input_len)
        delta = self.cost.admission(req.input_len, cached_len) - self.cost.admission(req.input_len, req.cached_len)
        self.ledger.record_correction(req.client, cached_len - req.cached_len, delta)
        req.cached_len = cached_len
        self.policy.charge_request(req, Charge(delta, self.options.weight_of(req.client)))
        return delta

    # -- progress -------------------------------------------------------------
    def produced(self, req: TrackedRequest, total_output: int) -> float:
        """The request has now generated ``total_output`` tokens in all."""
        new = total_output - req.output_charged
        if new <= 0 or req.state is RequestState.DONE:
            return 0.0
        client = req.client
        cost = self.cost.output(new, req.input_len + req.output_charged)
        if req.output_charged == 0:
            self.latency.first_token(client, self.clock() - req.arrival)
        req.output_charged = total_output
        self.ledger.record_output(client, new, cost)
        policy = self.policy
        if type(policy).charge_request is Policy.charge_request:
            # It takes ``Charge.weighted`` as is: a progress report, the most frequent charge, builds no Charge.
            policy.charge(client, cost / self.options.weight_of(client))
        else:
            policy.charge_request(req, Charge(cost, self.options.weight_of(client), output_tokens=new))
        # No last_active stamp: a request not done keeps its client queued or running, so never
        # idle, and finish() stamps it. This runs once per progress report.
        return cost

    def finish(self, req: TrackedRequest) -> None:
        """Finished or aborted; no further charge. Idempotent."""
        if req.state is RequestState.DONE:
            return
        self.policy.on_finish(req)
        now = self.clock()
        if req.state is RequestState.QUEUED:
            self._leave_queue(req)
        else:
            self.activity[req.client].running -= 1
            self.ledger.record_finish(req.client)
            self.latency.finished(req.client, now - req.arrival)
        req.state = RequestState.DONE
        self.activity[req.client].last_active = now
        self.requests.pop(req.rid, None)

    # -- the policy's counters --------------------------------------------------
    def counter(self, client: str) -> float | None:
        """``client``'s counter (DLPM's deficit, VTC's virtual counter), None if it has none."""
        return self.policy.counter(client)

    def refill(self) -> bool:
        """CHECKREFILL where the policy refills counters (DLPM); whether it did."""
        return self.policy.check_refill()

    # -- run-time settings ------------------------------------------------------
    def settings(self) -> dict:
        """The settings in force: what an operator reads, and may change with ``update_settings``."""
        o = self.options
        out = {"policy": o.policy, "quantum": o.quantum, "input_weight": o.input_weight,
               "output_weight": o.output_weight, "client_weights": dict(o.client_weights)}
        throttle = self.policy.throttle_settings()
        if throttle is not None:
            out["throttle"] = throttle
        return out

    def update_settings(self, update: SettingsUpdate) -> dict:
        """Apply ``update`` from the next scheduling pass on; returns ``settings()``.

        Charges already made stand; a new quantum applies from the next refill.
        Throttle limits on a policy that does not throttle raise ``OptionError``,
        before anything changed.
        """
        if update.throttle:
            self.policy.update_throttle(update.throttle)
        if update.quantum is not None:
            self.options.quantum = update.quantum
        merged = {**self.options.client_weights, **update.client_weights}
        self.options.client_weights = {client: w for client, w in merged.items() if w is not None}
        self.policy.settings_changed()
        return self.settings()

    # -- bounded memory -------------------------------------------------------
    def at_arrival_stamp(self, stamp: float) -> list[str]:
        """With a ``StampClock``, before an arrival is checked: move time to ``stamp`` and forget
        the clients idle as of it. Copies fed the same stamps and arrivals then forget each client
        at the same arrival, whenever else they sweep."""
        self.clock.observe(stamp)
        return self.collect_idle()

    def collect_idle(self) -> list[str]:
        """Forget clients with nothing queued or running for ``idle_timeout_s``."""
        horizon = self.clock() - self.options.idle_timeout_s
        gone = [c for c, a in self.activity.items() if a.idle and a.last_active < horizon]
        for client in gone:
            del self.activity[client]
            self.policy.forget(client)
            self.ledger.forget(client)
            self.latency.forget(client)
        return gone
