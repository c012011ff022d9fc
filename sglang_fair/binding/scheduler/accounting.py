"""Hooks on SGLang's ``Scheduler`` that feed the FairScheduler.

Each function below wraps one ``sglang.srt.managers.scheduler.Scheduler``
method (the hook table is ``binding/hooks.py``); the admission gate is
``scheduler/admission_gate.py``:

* ``note_queued``            AFTER  ``Scheduler._add_request_to_queue``: a new,
  retracted or preempted request entered the waiting queue (VTC's counter lift
  happens here; a retracted request is never charged again).
* ``fair_prefill_adder``     AFTER  ``Scheduler.get_prefill_adder_class``:
  ``FairPrefillAdder`` (``scheduler/prefill_adder.py``) bound to the
  scheduler's policy; it charges each request's extend tokens when SGLang
  admits it and, with isolation, preempts for starved clients.
* ``charge_outputs``         AFTER  ``Scheduler.process_batch_result``: every
  generated token is charged once (decode, the first token from prefill,
  mixed chunks, speculative steps), and finished or aborted requests stop
  being charged.
* ``note_aborts``            AFTER  ``Scheduler.abort_request``: requests aborted
  while queued leave the fairness state.
* ``refresh_when_idle``      BEFORE ``Scheduler.on_idle``: idle clients are
  dropped and per-client gauges refreshed also when no batch runs (SGLang's
  idle loop wakes at least once a second), so they never show a finished
  flood as still running.
* ``throttle_arrivals``      AROUND ``Scheduler._abort_on_queued_limit``: SGLang's
  own check of an arriving request against the queue limit; FairServe's
  overload throttle refuses the request there with HTTP 429 (the HTTP
  server keeps its ``Retry-After``: ``http/throttle_response.py``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
from http import HTTPStatus

from sglang.srt.managers.schedule_policy import PrefillAdder

from sglang_fair.binding.common import sglang_private
from sglang_fair.binding.common.version import installed_sglang, sends_aborts_inline
from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed
from sglang_fair.binding.scheduler.client_metrics import ClientMetrics
from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder
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
            _fail_request(scheduler, fair, req, exc)
            sglang_private.release_aborted_request(scheduler, req)
    return result


def _fail_request(scheduler, fair: FairSchedulePolicy, req, exc: Exception) -> None:
    """Our code failed on ``req``: answer it with one error (HTTP 500) and forget it, so
    the scheduler, and every other request, goes on. Called from an ``except`` block."""
    logger.exception("sglang-fair: scheduling request %r failed; answering it with an error", req.rid)
    with contextlib.suppress(Exception):
        fair.forget(req)
    _refuse(scheduler, req, HTTPStatus.INTERNAL_SERVER_ERROR,
            f"sglang-fair could not schedule this request ({type(exc).__name__}: {exc})")


def _refuse(scheduler, req, status: HTTPStatus, message: str, **fields) -> None:
    """Send ``req``'s one final answer: an abort with ``status`` (SGLang's own refusal path)."""
    from sglang.srt.managers.scheduler import _make_abort_req

    reason = {"type": "abort", "status_code": status, "message": message, **fields}
    abort_req = _make_abort_req(req, finished_reason=reason)
    if sends_aborts_inline():  # as SGLang itself does there (the hook table reports these the same way)
        scheduler.ipc_channels.send_to_tokenizer.send_output(abort_req, req)
    else:
        scheduler.send_abort_output(abort_req, req)


def fair_prefill_adder(adder_cls, scheduler, *args, **kwargs):
    fair = fair_policy(scheduler)
    if fair is None:
        return adder_cls
    if adder_cls is not PrefillAdder:  # an adder of SGLang's own we do not extend: refuse, never run unfair
        raise AdmissionBypassed(
            f"sglang-fair: SGLang {installed_sglang()} builds its prefill adder from {adder_cls.__qualname__}, "
            "not PrefillAdder; the fair policy cannot charge or gate admission through it")
    return functools.partial(FairPrefillAdder, fair_policy=fair)


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
        _housekeeping(scheduler, fair)
    return result


def refresh_when_idle(scheduler, *args, **kwargs) -> None:
    fair = fair_policy(scheduler)
    if fair is not None:
        _housekeeping(scheduler, fair)
        _log_admissions(fair)


def _log_admissions(fair: FairSchedulePolicy) -> None:
    """Once idle after admitting, log how many requests this rank admitted and their digest:
    the tensor-parallel ranks of a worker must log the same."""
    admissions = fair.fair.admissions
    if admissions != fair.logged_admissions:
        fair.logged_admissions = admissions
        logger.info("sglang-fair: %d admissions, digest %s", admissions, fair.fair.admission_digest())


def _housekeeping(scheduler, fair: FairSchedulePolicy) -> None:
    """Drop idle clients and refresh the gauges (each at most once a second; a dropped
    client's series leave with the next refresh)."""
    fair.sweep_idle_clients()
    metrics = _client_metrics(fair)
    if metrics is not None:
        metrics.maybe_update(fair)


def _client_metrics(fair: FairSchedulePolicy) -> ClientMetrics | None:
    """The rank's per-client exporter, decided at first use (SGLang's runtime context is published by then)."""
    metrics = fair.client_metrics
    if metrics is False:
        from sglang.srt.runtime_context import get_observability, get_parallel

        metrics = None
        parallel = get_parallel()
        # Ray actors get no Prometheus directory shared with the HTTP server: nothing to export to.
        # Tensor-parallel ranks hold the same state: the first one exports it for its worker.
        if (get_observability().enable_metrics and os.environ.get("PROMETHEUS_MULTIPROC_DIR")
                and getattr(parallel, "tp_rank", 0) == 0):
            metrics = ClientMetrics(parallel.dp_rank)
        fair.client_metrics = metrics
    return metrics


def throttle_arrivals(original, scheduler, req, *args, **kwargs):
    if original(scheduler, req, *args, **kwargs):
        return True  # SGLang refused it already (queue full)
    fair = fair_policy(scheduler)
    if fair is None:
        return False
    try:
        decision = fair.throttle(req, _kv_usage(scheduler))
    except Exception as exc:  # noqa: BLE001 - one request's failure must not stop the scheduler
        _fail_request(scheduler, fair, req, exc)
        return True  # the caller releases the request
    if decision is None:
        return False
    # Whole seconds: SGLang's finish-reason dicts carry str/int values only.
    _refuse(scheduler, req, HTTPStatus.TOO_MANY_REQUESTS, decision.message,
            retry_after=max(1, math.ceil(decision.retry_after_s)))
    return True  # the caller releases the request, as for its own refusals


def _kv_usage(scheduler) -> float:
    """Fraction of the KV pool held by requests (evictable cached prefixes count as free)."""
    total = scheduler.max_total_num_tokens
    free = scheduler.token_to_kv_pool_allocator.available_size() + scheduler.tree_cache.evictable_size()
    return 1.0 - free / total if total else 0.0


def note_aborts(result, scheduler, *args, **kwargs):
    fair = fair_policy(scheduler)
    if fair is not None:
        fair.reconcile_queue(scheduler.waiting_queue)
    return result
