"""The admission gate: AROUND ``Scheduler._get_new_batch_prefill_raw``, SGLang's admission pass.

The walk itself needs no hook of its own: ``FairSchedulePolicy.calc_priority``
starts it and ``FairPrefillAdder.add_one_req`` follows it
(``admission_walk.py``). Around each pass this gate:

* brings the tracked queue in line with SGLang's (``reconcile_queue``);
* with ``--fair-isolation``, names the pass's starved clients and, when the
  pass starts with a full batch, preempts room for them first
  (``isolation.make_room``);
* on SGLang 0.5.21, whose loop builds the adder by the class name
  ``PrefillAdder``, lends that adder the pass's policy (``pass_policy``);
* after the pass, checks that every request SGLang put in the new batch went
  through the fair adder, and restores the waiting queue's order (the walk
  moved its candidates forward; the ones not admitted go back).

A request admitted past the fair adder stops the scheduler
(``AdmissionBypassed``) rather than let it run unfair.
"""

from __future__ import annotations

import contextvars

from sglang_fair.binding.scheduler import isolation
from sglang_fair.binding.scheduler.admission_walk import bypassed
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy, fair_policy
from sglang_fair.core.requests import RequestState

# The fair policy of the admission pass in progress (its scheduler's), for adders SGLang builds by class name.
_PASS_POLICY: contextvars.ContextVar = contextvars.ContextVar("sglang_fair_pass_policy", default=None)


def gate_prefill_admission(original, scheduler, *args, **kwargs):
    fair = fair_policy(scheduler)
    if fair is None:
        return original(scheduler, *args, **kwargs)
    fair.reconcile_queue(scheduler.waiting_queue)
    token = _PASS_POLICY.set(fair)
    try:
        if not fair.gated:
            return original(scheduler, *args, **kwargs)
        return _gated_pass(original, fair, scheduler, *args, **kwargs)
    finally:
        _PASS_POLICY.reset(token)


def _gated_pass(original, fair: FairSchedulePolicy, scheduler, *args, **kwargs):
    running_batch = _running_batch(args, kwargs)
    fair.isolating = isolation.starved_clients(fair, running_batch)
    fair.preempting = bool(fair.isolating) and isolation.batch_full(scheduler, running_batch)
    if fair.preempting:
        isolation.make_room(scheduler, fair, running_batch)
    fair.walk = None
    try:
        result = original(scheduler, *args, **kwargs)
        walk = fair.walk  # None when SGLang returned before sorting the queue
    finally:
        fair.walk = None
        fair.isolating, fair.preempting = set(), False
    _check_admitted(fair, result)
    if walk is not None:
        walk.restore_order(scheduler.waiting_queue)
    return result


def pass_policy() -> FairSchedulePolicy | None:
    """The fair policy of the admission pass in progress, or None outside one."""
    return _PASS_POLICY.get()


def _check_admitted(fair: FairSchedulePolicy, result) -> None:
    """Every request in the new prefill batch was admitted by the fair adder (it is RUNNING to the core)."""
    new_batch = result[0] if isinstance(result, tuple) else None
    for req in getattr(new_batch, "reqs", None) or ():
        tracked = fair.fair.requests.get(req.rid)
        if tracked is not None and tracked.state is RequestState.QUEUED:
            raise bypassed(f"SGLang admitted {req.rid!r} past the fair prefill adder (FairPrefillAdder.add_one_req)")


def _running_batch(args: tuple, kwargs: dict):
    """``running_batch`` of ``_get_new_batch_prefill_raw(self, prefill_delayer_single_pass, running_batch)``."""
    return kwargs["running_batch"] if "running_batch" in kwargs else args[1] if len(args) > 1 else None
