"""One router of ``sglang_fair.router`` serving one ``DataParallelController``: the managers, composed.

Built in two steps, because the router's sockets must exist before SGLang
starts the schedulers, and the managers need the controller SGLang builds
then: ``create`` opens the report channel and the KV event sockets
(``router_sockets``); ``attach`` builds one manager per concern for the
controller and puts the router's dispatch in place of SGLang's:

* ``dispatch.Dispatcher``: requests placed, held (late binding), untracked;
* ``worker_feedback.WorkerFeedback``: the workers' reports into the router;
* ``worker_health.WorkerHealth``: liveness, guarded sockets, a worker's death;
* ``tokenizer_replies.TokenizerReplies``: the controller's own answers;
* ``event_loop.EventLoop``: the loop that feeds them all.
"""

from __future__ import annotations

import os
import time

import zmq

from sglang_fair.binding.common import settings, sglang_private, worker_status
from sglang_fair.binding.common.settings import RouterSettings
from sglang_fair.binding.controller import router_sockets
from sglang_fair.binding.controller.dispatch import Dispatcher
from sglang_fair.binding.controller.event_loop import EventLoop
from sglang_fair.binding.controller.tokenizer_replies import TokenizerReplies
from sglang_fair.binding.controller.worker_feedback import WorkerFeedback
from sglang_fair.binding.controller.worker_health import WorkerHealth
from sglang_fair.binding.controller.worker_liveness import RayLiveness, loops_per_rank
from sglang_fair.binding.controller.worker_sockets import guard_worker_sockets
from sglang_fair.router import Router, make_router


class RouterBinding:
    """The router, its sockets, and (once attached to a controller) the managers that serve it."""

    def __init__(self, router: Router, context: zmq.Context, feedback_socket: zmq.Socket,
                 kv_sockets: list[zmq.Socket]) -> None:
        # Imports SGLang's KV event types: loaded only where a router of ours runs.
        from sglang_fair.binding.controller.kv_events import KVEventTracker

        self.router = router
        self.context = context
        self.feedback_socket = feedback_socket
        self.kv_sockets = kv_sockets
        self.kv_tracker = KVEventTracker(router, router.num_workers)
        self.created = time.monotonic()  # before the schedulers start: their hello is awaited from here
        self.controller = None
        self.dispatcher: Dispatcher | None = None
        self.health: WorkerHealth | None = None
        self.worker_feedback: WorkerFeedback | None = None
        self.loop: EventLoop | None = None

    @classmethod
    def create(cls, method: str, num_workers: int, server_args: object) -> RouterBinding:
        """The router of ``method`` and its sockets, before SGLang starts the schedulers."""
        config = RouterSettings.load(method)
        router = make_router(method, num_workers, **config.options)
        context = zmq.Context.instance()
        feedback = router_sockets.open_feedback(context, config)
        settings.export_late_binding(router.holds_requests)
        try:
            kv = router_sockets.open_kv_events(context, config, server_args, num_workers)
        except BaseException:
            feedback.close(linger=0)
            raise
        return cls(router, context, feedback, kv)

    def bind(self, controller: object, to_tokenizer: zmq.Socket, metrics: object | None = None) -> None:
        """The managers, serving ``controller`` and answering the tokenizer on ``to_tokenizer``."""
        self.controller = controller
        replies = TokenizerReplies(to_tokenizer)
        self.dispatcher = Dispatcher(self.router, controller, replies)
        self.health = WorkerHealth(self.router, controller, self.dispatcher, replies, self.kv_tracker, self.created)
        self.worker_feedback = WorkerFeedback(self.router, self.dispatcher, self.health)
        self.loop = EventLoop(controller, self.router, self.feedback_socket, self.kv_sockets, self.kv_tracker,
                              self.dispatcher, self.health, self.worker_feedback, replies, metrics)

    def attach(self, controller: object, port_args: object) -> None:
        """After SGLang built ``controller``: the managers, and the router's dispatch in place of SGLang's."""
        from sglang.srt.runtime_context import get_observability
        from sglang.srt.utils.network import get_zmq_socket

        metrics = None
        if get_observability().enable_metrics and os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from sglang_fair.binding.controller.router_metrics import RouterMetrics

            metrics = RouterMetrics()
        self.bind(controller, get_zmq_socket(self.context, zmq.PUSH, port_args.tokenizer_ipc_name, False), metrics)
        sglang_private.replace_dispatch(controller, self.dispatcher.dispatch)
        self.health.worker_sockets = guard_worker_sockets(controller, self.health.is_dead)
        refs = getattr(controller, "event_loop_refs", None)  # only SGLang's RayDataParallelController has them
        if refs:
            n = self.router.num_workers
            self.health.liveness = RayLiveness(n, time.monotonic(), loops_per_rank(refs, n))
        worker_status.write_status(self.router.alive)

    def serve(self) -> None:
        self.loop.serve()

    def close(self) -> None:
        for sock in [self.feedback_socket, *self.kv_sockets]:
            sock.close(linger=0)
