"""The completion side channel, scheduler side: each worker tells the router what finished.

Hooks (registered by ``dp_controller.register_hooks``, active only in a
scheduler whose environment names the router's address in
``SGLANG_FAIR_ROUTER_FEEDBACK``):

* AFTER ``Scheduler.__init__``: ``("hello", rank, pid)``, so the controller can
  watch the process.
* AFTER ``SchedulerOutputStreamer.stream_output`` and
  ``Scheduler.send_abort_output``: ``("done", rank, [(rid, client, output
  tokens)])`` for finished, rejected or aborted requests; ``("beat", rank, 0)``
  every few seconds from a worker busy with long requests.

Reports are pushed without ever blocking the worker: a full queue drops the
report and counts it.
"""

from __future__ import annotations

import logging
import os
import time

import msgspec
import zmq

from sglang_fair.core.clients import normalize_client_id

logger = logging.getLogger(__name__)

FEEDBACK_ENV = "SGLANG_FAIR_ROUTER_FEEDBACK"
HEARTBEAT_S = 5.0  # a worker running batches reports at least this often

_sender: zmq.Socket | None | bool = False  # False: not looked up yet in this process
_dropped = 0
_last_sent = 0.0


def _feedback_sender() -> zmq.Socket | None:
    global _sender
    if _sender is False:
        endpoint = os.environ.get(FEEDBACK_ENV)
        _sender = None
        if endpoint:
            from sglang.srt.runtime_context import get_parallel

            parallel = get_parallel()
            # One report per DP rank: from its first TP rank of the last PP stage.
            if getattr(parallel, "tp_rank", 0) == 0 and getattr(parallel, "pp_rank", 0) == getattr(parallel, "pp_size", 1) - 1:
                sock = zmq.Context.instance().socket(zmq.PUSH)
                sock.setsockopt(zmq.SNDHWM, 100_000)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(endpoint)
                _sender = sock
    return _sender


def _send(kind: str, payload: object) -> bool:
    """Push one report to the controller without ever blocking; False if dropped."""
    sock = _feedback_sender()
    if sock is None:
        return True
    from sglang.srt.runtime_context import get_parallel

    global _last_sent
    rank = get_parallel().dp_rank or 0
    try:
        sock.send(msgspec.msgpack.encode((kind, rank, payload)), flags=zmq.NOBLOCK)
    except zmq.Again:
        return False
    _last_sent = time.monotonic()
    return True


def _send_reports(items: list[tuple[str, str, int]]) -> None:
    global _dropped
    if items and not _send("done", items):
        _dropped += len(items)
        if _dropped == len(items) or _dropped % 10_000 < len(items):
            logger.warning("sglang-fair: router feedback queue full, %d completion reports dropped", _dropped)


def announce_worker(result, scheduler, *args, **kwargs):
    """AFTER ``Scheduler.__init__``: tell the router which process serves this rank."""
    if _feedback_sender() is not None:
        _send("hello", os.getpid())
    return result


def _report(req) -> tuple[str, str, int] | None:
    if getattr(req, "_fair_router_reported", False):
        return None
    req._fair_router_reported = True
    return (req.rid, normalize_client_id(getattr(req, "routing_key", None)), len(getattr(req, "output_ids", ()) or ()))


def report_finished(result, streamer, reqs, *args, **kwargs):
    if reqs and _feedback_sender() is not None:
        items = [r for r in (_report(req) for req in reqs if req.finished()) if r is not None]
        if items:
            _send_reports(items)
        elif time.monotonic() - _last_sent > HEARTBEAT_S:
            _send("beat", 0)  # busy with long requests: still alive
    return result


def report_aborted(result, scheduler, abort_req, req, *args, **kwargs):
    if req is not None and _feedback_sender() is not None:
        item = _report(req)
        if item is not None:
            _send_reports([item])
    return result
