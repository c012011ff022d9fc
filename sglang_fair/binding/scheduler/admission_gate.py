"""The admission gate: SGLang's own admission loop walks the fair policy's candidates.

``Scheduler._get_new_batch_prefill_raw`` builds a ``PrefillAdder`` and then
admits with ``for req in self.waiting_queue``. During a gated pass
(``gate_prefill_admission``, AROUND that function) the waiting queue is an
``_AdmissionQueue``; building the fair adder arms it, and its next iteration,
the admission loop that follows the adder, yields the policy's candidates
instead of the raw queue. Everything else in the loop (budgets, chunking,
LoRA, prefetch) stays SGLang's. SGLang 0.5.22 and later build the adder from
``Scheduler.get_prefill_adder_class()``, which the fair policy extends; 0.5.21
names ``PrefillAdder`` itself, so there the fair adder stands in for that class
and takes its policy from the pass in progress (``pass_policy``).

This relies on the shape of one SGLang function, so it is checked twice, and
a mismatch stops the scheduler rather than letting it run unfair:

* at start (``admission_loop_check.py``, from ``FairSchedulePolicy``);
* in every pass: each request the loop hands to ``add_one_req`` must be the
  candidate the policy offered last, and an armed queue must have been walked
  (``AdmissionBypassed`` otherwise).
"""

from __future__ import annotations

import contextvars

from sglang_fair.binding.scheduler import isolation
from sglang_fair.binding.scheduler.admission_loop_check import AdmissionBypassed, bypass_message
from sglang_fair.binding.scheduler.schedule_policy import fair_policy

# The fair policy of the admission pass in progress (its scheduler's), for adders SGLang builds itself.
_PASS_POLICY: contextvars.ContextVar = contextvars.ContextVar("sglang_fair_pass_policy", default=None)


class _AdmissionQueue(list):
    """The waiting queue, whose next iteration after arming walks the policy.

    Any other iteration (SGLang's prefix matching, the queue rebuilt after
    admission, aborts) sees the plain list.
    """

    __slots__ = ("armed_by",)

    def __init__(self, items=()) -> None:
        super().__init__(items)
        self.armed_by = None

    def __iter__(self):
        fair = self.armed_by
        if fair is None:
            return list.__iter__(self)
        self.armed_by = None
        return fair.admission_order(self)


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


def _gated_pass(original, fair, scheduler, *args, **kwargs):
    queue = scheduler.waiting_queue
    if not isinstance(queue, _AdmissionQueue):
        queue = scheduler.waiting_queue = _AdmissionQueue(queue)
    running_batch = _running_batch(args, kwargs)
    fair.isolating = isolation.starved_clients(fair, running_batch)
    fair.preempting = bool(fair.isolating) and isolation.batch_full(scheduler, running_batch)
    preemption = scheduler.enable_priority_preemption
    if fair.preempting:
        scheduler.enable_priority_preemption = True  # SGLang reopens the full batch and asks the adder to preempt
    fair.admission_queue = queue  # armed by the adder's construction (fair_adder_built)
    try:
        result = original(scheduler, *args, **kwargs)
    finally:
        walked = queue.armed_by is None
        queue.armed_by = None
        fair.admission_queue = None
        fair.isolating, fair.preempting = set(), False
        scheduler.enable_priority_preemption = preemption
    if not walked:
        raise AdmissionBypassed(bypass_message("built the prefill adder but never iterated the waiting queue"))
    return result


def pass_policy():
    """The fair policy of the admission pass in progress, or None outside one."""
    return _PASS_POLICY.get()


def fair_adder_built(fair) -> None:
    """The pass's adder exists: the admission loop is next, so arm the queue for it."""
    if fair.admission_queue is not None:
        fair.admission_queue.armed_by = fair


def check_offered(fair, req) -> None:
    """In a gated pass, ``req`` must be the candidate the policy offered last."""
    if fair.admission_queue is not None and req is not fair.offered:
        raise AdmissionBypassed(bypass_message(f"asked to admit {req.rid!r}, which the fair policy did not offer"))


def plain_queue_for_lora_drainer(original, drainer, waiting_queue, *args, **kwargs):
    """AROUND ``LoRADrainer.update_draining_state``: it iterates the queue between the
    adder and the admission loop, so it gets a plain copy and the armed walk stays the loop's."""
    if isinstance(waiting_queue, _AdmissionQueue):
        waiting_queue = waiting_queue[:]  # a slice of a list subclass is a plain list
    return original(drainer, waiting_queue, *args, **kwargs)


def _running_batch(args: tuple, kwargs: dict):
    """``running_batch`` of ``_get_new_batch_prefill_raw(self, prefill_delayer_single_pass, running_batch)``."""
    return kwargs["running_batch"] if "running_batch" in kwargs else args[1] if len(args) > 1 else None
