"""The admission gate: AROUND ``Scheduler._get_new_batch_prefill_raw``, SGLang's admission pass.

The walk itself needs no hook of its own: ``FairSchedulePolicy.calc_priority``
starts it and ``FairPrefillAdder.add_one_req`` follows it
(``admission_walk.py``). Around each pass this gate:

* brings the tracked queue in line with SGLang's (``reconcile_queue``);
* creates the pass's ``AdmissionPass`` (``admission_pass.py``): with
  ``--fair-isolation``, the pass's starved clients, and whether it may
  preempt for them; when the pass starts with a full batch it preempts room
  for them first (``isolation.make_room``);
* holds the pass open on the scheduler's policy while SGLang runs it, for
  ``calc_priority`` (which starts the walk in it) and the adder (built with
  it), and closes it when SGLang returns or raises;
* with ``--fair-isolation``, counts what each pass prefilled, and skips the
  pass when a chunk's worth has run since the running batch last decoded and
  a light client's running requests should decode first
  (``isolation.decode_turn``): SGLang then decodes the running batch;
* after the pass, checks that every request SGLang put in the new batch went
  through the fair adder, and restores the waiting queue's order (the walk
  moved its candidates forward; the ones not admitted go back).

A request admitted past the fair adder stops the scheduler
(``AdmissionBypassed``) rather than let it run unfair.
"""

from __future__ import annotations

from sglang_fair.binding.scheduler import isolation
from sglang_fair.binding.scheduler.admission_pass import AdmissionPass
from sglang_fair.binding.scheduler.admission_walk import bypassed
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy, fair_policy
from sglang_fair.core.requests import RequestState


def gate_prefill_admission(original, scheduler, *args, **kwargs):
    fair = fair_policy(scheduler)
    if fair is None:
        return original(scheduler, *args, **kwargs)
    fair.reconcile_queue(scheduler.waiting_queue)
    running_batch = _running_batch(args, kwargs)
    if fair.gated and isolation.decode_turn(scheduler, fair, running_batch):
        return None, running_batch
    # SGLang's own policies (accounting only) get a pass too: their adder charges what it admits.
    admission = _new_pass(fair, scheduler, running_batch) if fair.gated else AdmissionPass()
    with fair.admitting(admission):
        if admission.preempting:
            isolation.make_room(scheduler, fair, running_batch, admission.starved)
        result = original(scheduler, *args, **kwargs)
        walk = admission.walk  # None when SGLang returned before sorting the queue
    if fair.gated:
        isolation.after_pass(scheduler, fair, result[0] if isinstance(result, tuple) else None)
        _check_admitted(fair, result)
        if walk is not None:
            walk.restore_order(scheduler.waiting_queue)
    return result


def _new_pass(fair: FairSchedulePolicy, scheduler, running_batch) -> AdmissionPass:
    """A gated policy's pass: latency isolation's starved clients, and whether it starts full."""
    starved = isolation.starved_clients(fair, running_batch)
    return AdmissionPass(starved=starved,
                         preempting=bool(starved) and isolation.batch_full(scheduler, running_batch))


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
