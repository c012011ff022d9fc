"""Charging: the scheduler hooks that keep the FairScheduler's account of each request.

Admission is charged by the fair adder (``prefill_adder.FairPrefillAdder``);
everything else a request is charged for, or leaves the account by, passes
here. Each function wraps one ``sglang.srt.managers.scheduler.Scheduler``
method (the hook table is ``binding/hooks.py``):

* ``note_queued``       AFTER  ``Scheduler._add_request_to_queue``: a new,
  retracted or preempted request entered the waiting queue (VTC's counter lift
  happens here; a retracted request is never charged again).
* ``charge_outputs``    AFTER  ``Scheduler.process_batch_result``: every
  generated token is charged once (decode, the first token from prefill,
  mixed chunks, speculative steps), and finished or aborted requests stop
  being charged.
* ``note_aborts``       AFTER  ``Scheduler.abort_request``: requests aborted
  while queued leave the fairness state.
* ``refresh_when_idle`` BEFORE ``Scheduler.on_idle``: idle clients are
  dropped and per-client gauges refreshed also when no batch runs (SGLang's
  idle loop wakes at least once a second), so they never show a finished
  flood as still running; and the rank's admission digest is logged
  (``admission_log.py``).
"""

from __future__ import annotations

import contextlib
import logging

from sglang_fair.binding.common import sglang_private
from sglang_fair.binding.scheduler.refusals import fail_request
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy, fair_policy

logger = logging.getLogger(__name__)


def note_queued(result, scheduler, req, *args, **kwargs):
    fair = fair_policy(scheduler)
    queue = scheduler.waiting_queue
    # _add_request_to_queue may abort instead of queueing; only a request that
    # is now last in the queue was queued.
    if fair is not None and queue and queue[-1] is req:
        try:
            fair.on_queued(req)
        except Exception as exc:  # noqa: BLE001 - one request's failure must not stop the scheduler
            queue.pop()
            fail_request(scheduler, fair, req, exc)
            sglang_private.release_aborted_request(scheduler, req)
    return result


def charge_outputs(result, scheduler, batch, *args, **kwargs):
    fair = fair_policy(scheduler)
    if fair is not None and batch is not None:
        for req in batch.reqs:
            try:
                fair.on_progress(req)
            except Exception:  # noqa: BLE001 - the request runs on uncharged rather than stop the scheduler
                logger.exception("sglang-fair: charging request %r failed; it is no longer charged", req.rid)
                with contextlib.suppress(Exception):
                    fair.forget(req)
        _housekeeping(fair)
    return result


def note_aborts(result, scheduler, *args, **kwargs):
    fair = fair_policy(scheduler)
    if fair is not None:
        fair.reconcile_queue(scheduler.waiting_queue)
    return result


def refresh_when_idle(scheduler, *args, **kwargs) -> None:
    fair = fair_policy(scheduler)
    if fair is not None:
        _housekeeping(fair)
        # Once idle after admitting: the tensor-parallel ranks of a worker must log the same.
        fair.admission_log.log_if_changed(fair.fair, fair.decode_turns_taken)


def _housekeeping(fair: FairSchedulePolicy) -> None:
    """Drop idle clients and refresh the gauges (each at most once a second; a dropped
    client's series leave with the next refresh)."""
    fair.sweep_idle_clients()
    fair.client_metrics.refresh(fair)
