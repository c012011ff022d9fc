"""The controller's event loop with a router of ours, in place of ``DataParallelController.event_loop``.

It polls the tokenizer, the workers' report channel and the KV event sockets
together (no busy loop), and every ``LIVENESS_EVERY_S`` checks the workers
and exports the router's metrics.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import zmq

from sglang_fair.binding.common import sglang_private
from sglang_fair.binding.common.settings import ADMIN_SETTINGS_KEY
from sglang_fair.binding.controller.dispatch import Dispatcher
from sglang_fair.binding.controller.tokenizer_replies import TokenizerReplies
from sglang_fair.binding.controller.worker_feedback import WorkerFeedback
from sglang_fair.binding.controller.worker_health import WorkerHealth
from sglang_fair.core import OptionError, SettingsUpdate
from sglang_fair.router import Router

if TYPE_CHECKING:
    # Loaded where a router of ours runs: SGLang's KV event types, the metrics exporter.
    from sglang_fair.binding.controller.kv_events import KVEventTracker
    from sglang_fair.binding.controller.router_metrics import RouterMetrics

logger = logging.getLogger(__name__)

POLL_MS = 50
LIVENESS_EVERY_S = 0.5


class EventLoop:
    """Hands each message from the tokenizer, the workers and their KV events to the manager that takes it."""

    def __init__(self, controller: object, router: Router, feedback_socket: zmq.Socket, kv_sockets: list[zmq.Socket],
                 kv_tracker: KVEventTracker, dispatcher: Dispatcher, health: WorkerHealth,
                 worker_feedback: WorkerFeedback, replies: TokenizerReplies,
                 metrics: RouterMetrics | None = None) -> None:
        self.controller = controller
        self.router = router
        self.feedback_socket = feedback_socket
        self.kv_sockets = kv_sockets
        self.kv_tracker = kv_tracker
        self.dispatcher = dispatcher
        self.health = health
        self.worker_feedback = worker_feedback
        self.replies = replies
        self.metrics = metrics  # with --enable-metrics
        self.kv_seen: set[int] = set()  # ranks whose KV events arrived (logged once each)

    def serve(self) -> None:
        """Run for good, as SGLang's event loop does."""
        from sglang.srt.managers.io_struct import sock_recv

        controller = self.controller
        poller = zmq.Poller()
        poller.register(controller.recv_from_tokenizer, zmq.POLLIN)
        poller.register(self.feedback_socket, zmq.POLLIN)
        for sock in self.kv_sockets:
            poller.register(sock, zmq.POLLIN)
        next_check = time.monotonic()
        while True:
            controller.soft_watchdog.feed()
            poller.poll(POLL_MS)
            while True:
                try:
                    recv_req = sock_recv(controller.recv_from_tokenizer, flags=zmq.NOBLOCK)
                except zmq.ZMQError:
                    break
                self.receive(recv_req)
            self.drain_feedback()
            self.drain_kv_events()
            now = time.monotonic()
            if now >= next_check:
                next_check = now + LIVENESS_EVERY_S
                self.health.check_workers(now)
                if self.metrics is not None:
                    self.metrics.maybe_update(self.router, self.dispatcher.unrouted)

    def receive(self, recv_req: object) -> None:
        """One message from the tokenizer: SGLang's dispatcher, after answering aborts of held
        requests and applying a run-time change of the fair settings to the router too."""
        from sglang.srt.managers.io_struct import AbortReq, SetInternalStateReq

        if isinstance(recv_req, AbortReq):
            self.dispatcher.cancel_held(recv_req)
        elif isinstance(recv_req, SetInternalStateReq) and ADMIN_SETTINGS_KEY in recv_req.server_args:
            try:
                self.router.update_settings(SettingsUpdate.parse(recv_req.server_args[ADMIN_SETTINGS_KEY]))
            except OptionError as exc:  # the schedulers refuse it too, and say so
                logger.warning("sglang-fair router: fair settings change refused: %s", exc)
        sglang_private.dispatch_as_sglang(self.controller, recv_req)
        self.replies.send(self.health.answers_owed(recv_req))

    def drain_feedback(self) -> None:
        while True:
            try:
                raw = self.feedback_socket.recv(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            self.worker_feedback.handle(raw)

    def drain_kv_events(self) -> None:
        for rank, sock in enumerate(self.kv_sockets):
            while True:
                try:
                    frames = sock.recv_multipart(flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                if self.router.alive[rank]:  # a dead worker's late events would re-add its blocks
                    if rank not in self.kv_seen:
                        self.kv_seen.add(rank)
                        logger.info("sglang-fair router: receiving KV events from worker %d", rank)
                    self.kv_tracker.handle_frames(rank, frames)
