"""The completion side channel, scheduler side: each worker tells the router what finished.

Hooks (listed in ``binding/hooks.py``, active only in a
scheduler whose environment names the router's address in
``SGLANG_FAIR_ROUTER_FEEDBACK``):

The messages are ``common/worker_reports.py``'s structs.

* AFTER ``Scheduler.__init__``: ``Hello(rank, pid)``, so the controller can
  watch the process.
* AFTER ``SchedulerOutputStreamer.stream_output`` and
  ``Scheduler.send_abort_output`` (before SGLang 0.5.23, the tokenizer
  socket's ``SenderWrapper.send_output``): ``Done(rank, [(rid, client, output
  tokens)])`` for finished, rejected or aborted requests; ``Beat(rank)``
  every few seconds from a worker busy with long requests.

Only for a router that holds requests (late binding; the controller sets
``SGLANG_FAIR_ROUTER_LATE_BINDING=1`` for the schedulers), two more, so that
the router knows when a worker's local queue has room again and what each
client has received:

* ``report_admitted`` AFTER ``Scheduler.get_new_batch_prefill``: ``Admitted(
  rank, [(rid, cached prompt tokens)])`` for requests entering a running batch
  for the first time (a retracted request coming back is not reported again).
* ``report_progress`` AFTER ``Scheduler.process_batch_result``: ``Progress(
  rank, [(rid, output tokens so far)])``, one message for the batch's
  unfinished requests that produced their first token or
  ``PROGRESS_EVERY_TOKENS`` tokens since their last report (a batch decoding
  in step reports every few steps).

Reports are pushed without ever blocking the worker: a full queue drops the
report and counts it.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import zmq

from sglang_fair.binding.common import settings, worker_reports
from sglang_fair.binding.common.attached_state import attached_or_new
from sglang_fair.binding.common.request_identity import client_of
from sglang_fair.binding.common.sglang_fields import cached_prefix_len

logger = logging.getLogger(__name__)

HEARTBEAT_S = 5.0  # a worker running batches reports at least this often
# The router charges a request's output at most this many tokens late; reporting every token
# would cost one message per decode step, and each report costs the router about a microsecond.
# At most the router's default finishing window (``finishing_tokens``, 8), so that a request
# running to its max_new is reported once inside it.
PROGRESS_EVERY_TOKENS = 8


class RouterReporter:
    """This scheduler process's end of the side channel: the socket, and what it has sent.

    One per process (``reporter()``), not per scheduler: the output streamer
    whose hook reports completions holds no reference to its scheduler.
    ``sock`` is None where no router listens (no ``SGLANG_FAIR_ROUTER_FEEDBACK``)
    or this is not the rank's reporting process; every report is then a no-op.
    """

    def __init__(self, sock: zmq.Socket | None, late_binding: bool) -> None:
        self.sock = sock
        self.late_binding = late_binding and sock is not None
        self.dropped = 0
        self.last_sent = 0.0

    @classmethod
    def from_settings(cls) -> "RouterReporter":
        endpoint = settings.feedback_address()
        sock = None
        if endpoint:
            from sglang.srt.runtime_context import get_parallel

            parallel = get_parallel()
            # One report per DP rank: from its first TP rank of the last PP stage.
            if getattr(parallel, "tp_rank", 0) == 0 and getattr(parallel, "pp_rank", 0) == getattr(parallel, "pp_size", 1) - 1:
                sock = zmq.Context.instance().socket(zmq.PUSH)
                sock.setsockopt(zmq.SNDHWM, 100_000)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(endpoint)
        return cls(sock, settings.late_binding())

    def send(self, report: type[worker_reports.Report], *fields) -> bool:
        """Push one report (``report(rank, *fields)``) without ever blocking; False if dropped."""
        if self.sock is None:
            return True
        from sglang.srt.runtime_context import get_parallel

        try:
            self.sock.send(worker_reports.encoder.encode(report(get_parallel().dp_rank or 0, *fields)),
                           flags=zmq.NOBLOCK)
        except zmq.Again:
            return False
        self.last_sent = time.monotonic()
        return True

    def send_items(self, items: list[tuple], report: type[worker_reports.Report] = worker_reports.Done) -> None:
        if items and not self.send(report, items):
            self.dropped += len(items)
            if self.dropped == len(items) or self.dropped % 10_000 < len(items):
                logger.warning("sglang-fair: router feedback queue full, %d reports dropped", self.dropped)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close(linger=0)


_REPORTER: RouterReporter | None = None  # made on first use, in the scheduler process


def reporter() -> RouterReporter:
    global _REPORTER
    if _REPORTER is None:
        _REPORTER = RouterReporter.from_settings()
    return _REPORTER


def announce_worker(result, scheduler, *args, **kwargs):
    """AFTER ``Scheduler.__init__``: tell the router which process serves this rank."""
    reporter().send(worker_reports.Hello, os.getpid())  # a no-op where no router listens
    return result


@dataclass(slots=True)
class ReportedToRouter:
    """What this worker has told the router of one request (attached to SGLang's ``Req``)."""

    done: bool = False  # finished or aborted: reported once
    admitted: bool = False
    progress: int = 0  # output tokens at the last progress report


def _reported(req) -> ReportedToRouter:
    return attached_or_new(req, ReportedToRouter)


def _report(req) -> tuple[str, str, int] | None:
    reported = _reported(req)
    if reported.done:
        return None
    reported.done = True
    return (req.rid, client_of(getattr(req, "routing_key", None)), len(getattr(req, "output_ids", ()) or ()))


def report_finished(result, streamer, reqs, *args, **kwargs):
    channel = reporter()
    if reqs and channel.sock is not None:
        items = [r for r in (_report(req) for req in reqs if req.finished()) if r is not None]
        if items:
            channel.send_items(items)
        elif time.monotonic() - channel.last_sent > HEARTBEAT_S:
            channel.send(worker_reports.Beat)  # busy with long requests: still alive
    return result


def report_aborted(result, sender, abort_req, req=None, *args, **kwargs):
    """AFTER the abort sender: ``Scheduler.send_abort_output(abort_req, req)``, or before SGLang
    0.5.23 ``SenderWrapper.send_output(output, recv_obj)``, which sends other replies too."""
    from sglang.srt.managers.io_struct import AbortReq

    channel = reporter()
    if req is not None and isinstance(abort_req, AbortReq) and channel.sock is not None:
        item = _report(req)
        if item is not None:
            channel.send_items([item])
    return result


def report_admitted(plan, scheduler, *args, **kwargs):
    """AFTER ``Scheduler.get_new_batch_prefill``: the batch's requests admitted for the first time.

    ``prefix_len`` is the prompt prefix the worker found in its cache when it
    admitted the request (what SGLang reports as ``cached_tokens``), so the
    router can correct the charge it made from its own index.
    """
    batch = getattr(plan, "batch_to_run", None)
    channel = reporter()
    if batch is None or not channel.late_binding:
        return plan
    items = []
    for req in batch.reqs:
        reported = _reported(req)
        if not reported.admitted:
            reported.admitted = True
            items.append((req.rid, min(cached_prefix_len(req), len(req.origin_input_ids))))
    channel.send_items(items, worker_reports.Admitted)
    return plan


def report_progress(result, scheduler, batch, *args, **kwargs):
    """AFTER ``Scheduler.process_batch_result``: cumulative output tokens of the batch's running
    requests that produced their first token or ``PROGRESS_EVERY_TOKENS`` since their last
    report (finished ones are reported as done)."""
    channel = reporter()
    if batch is None or not channel.late_binding:
        return result
    items = []
    for req in batch.reqs:
        out = len(req.output_ids)
        if req.finished():
            continue
        reported = _reported(req)
        # The first token at once: it tells the router a prompt of several chunks is prefilled.
        if out - reported.progress >= PROGRESS_EVERY_TOKENS or (reported.progress == 0 and out > 0):
            reported.progress = out
            items.append((req.rid, out))
    channel.send_items(items, worker_reports.Progress)
    return result
