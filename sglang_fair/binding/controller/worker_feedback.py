"""The workers' reports (``common/worker_reports.py``), turned into calls on the router.

Every report tells the liveness watch that its worker is alive; a ``Hello``
names its scheduler's process. ``Done`` frees the finished requests in the
router; for a router that holds requests, ``Admitted`` and ``Progress`` too,
and after each report the requests it released are sent.
"""

from __future__ import annotations

import logging

import msgspec

from sglang_fair.binding.common import worker_reports
from sglang_fair.binding.controller.dispatch import Dispatcher
from sglang_fair.binding.controller.worker_health import WorkerHealth
from sglang_fair.router import Router

logger = logging.getLogger(__name__)


class WorkerFeedback:
    """Reads one report at a time and tells the router, the dispatcher and the health watch."""

    def __init__(self, router: Router, dispatcher: Dispatcher, health: WorkerHealth) -> None:
        self.router = router
        self.dispatcher = dispatcher
        self.health = health

    def handle(self, raw: bytes) -> None:
        """One ``worker_reports`` message: a starting scheduler's ``Hello``, ``Done`` requests,
        a busy worker's ``Beat``; for late binding also ``Admitted`` and ``Progress``."""
        try:
            report = worker_reports.decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            logger.warning("sglang-fair router: malformed worker report ignored")
            return
        rank = report.rank
        if rank >= self.router.num_workers:
            logger.warning("sglang-fair router: report from unknown worker %s ignored", rank)
            return
        self.health.heard_from(rank)
        if isinstance(report, worker_reports.Hello):
            self.health.hello(rank, report.pid)
            return
        try:
            self.tell_router(report, rank)
        except Exception:
            # A router bug must not end the controller, and with it every worker's requests: the
            # report is lost to the router (logged), the requests still reach their clients.
            logger.exception("sglang-fair router: a %s report from worker %d failed in the router; ignored",
                             type(report).__name__, rank)
        self.dispatcher.send_released()  # a finish or an admission may have made room for a held request

    def tell_router(self, report: object, rank: int) -> None:
        router = self.router
        if isinstance(report, worker_reports.Done):
            for rid, _client, out in report.finished:
                self.dispatcher.finished(rid)
                router.on_finish(rid, rank, out)
        elif isinstance(report, worker_reports.Admitted):
            for rid, cached in report.admitted:
                router.on_admitted(rid, rank, cached)
        elif isinstance(report, worker_reports.Progress):
            for rid, out in report.progress:
                router.on_progress(rid, rank, out)
