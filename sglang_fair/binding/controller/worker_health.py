"""Worker health: which workers are alive, and what follows when one dies.

A worker that dies (its scheduler process exits; under Ray, its actor's event
loop ends; see ``worker_liveness``): the router stops routing to it and drops
its cache entries, and every request in flight on it (queued or running) gets
one explicit error (finish reason ``abort``, status 503) from the controller;
a late report from it is ignored. Requests are not re-dispatched, because the
router cannot know whether one had already streamed tokens to its client.
The controller's sockets to its workers are guarded (``worker_sockets``), so
that nothing blocks on a dead worker before its death is detected; requests
sent untracked (``routed_dp_rank``, a router failure) are failed with the
others. When every worker is dead the held requests get the same 503 error
as those in flight.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from sglang_fair.binding.common import settings, sglang_private, worker_status
from sglang_fair.binding.controller.dead_rank_answers import DeadRankAnswers
from sglang_fair.binding.controller.dispatch import Dispatcher
from sglang_fair.binding.controller.tokenizer_replies import TokenizerReplies, died
from sglang_fair.binding.controller.worker_liveness import ProcessLiveness, WorkerLiveness
from sglang_fair.binding.controller.worker_sockets import WorkerSocket
from sglang_fair.router import Router

if TYPE_CHECKING:
    # Imports SGLang's KV event types: the binding loads it only where a router of ours runs.
    from sglang_fair.binding.controller.kv_events import KVEventTracker

logger = logging.getLogger(__name__)


class WorkerHealth:
    """The watch over the workers (liveness, guarded sockets) and the handling of a death."""

    def __init__(self, router: Router, controller: object, dispatcher: Dispatcher, replies: TokenizerReplies,
                 kv_tracker: KVEventTracker, started: float) -> None:
        self.router = router
        self.controller = controller
        self.dispatcher = dispatcher
        self.replies = replies
        self.kv_tracker = kv_tracker
        # Process backend until the binding finds Ray's actors; ``started`` is before the schedulers were.
        self.liveness: WorkerLiveness = ProcessLiveness(
            router.num_workers, started, lambda: getattr(controller, "scheduler_procs", None) or [])
        self.worker_sockets: list[WorkerSocket | None] = []  # guarded by the binding's attach
        self.dead_rank_answers = DeadRankAnswers(router.num_workers)

    def heard_from(self, rank: int) -> None:
        self.liveness.heard_from(rank, time.monotonic())

    def hello(self, rank: int, pid: int) -> None:
        """Worker ``rank`` announced its scheduler's process."""
        self.liveness.hello(rank, pid)

    def is_dead(self, rank: int) -> bool:
        return not self.router.alive[rank] or rank in self.liveness.dead_ranks()

    def answers_owed(self, message: object) -> list:
        """``message`` went to every live worker: the answers owed to the tokenizer for the dead ones."""
        return self.dead_rank_answers.forwarded(message, self.router.alive)

    def check_workers(self, now: float) -> None:
        router = self.router
        unreachable = [sock.rank for sock in self.worker_sockets if sock is not None and sock.unreachable]
        for rank in sorted({*self.liveness.dead_ranks(), *unreachable}):
            if router.alive[rank]:
                self.worker_died(rank)
        self.liveness.warn_quiet(router.alive, router.queue_sizes, now, settings.feedback_address())

    def worker_died(self, rank: int) -> None:
        lost = self.router.on_worker_down(rank)
        self.kv_tracker.forget_worker(rank)
        sglang_private.mark_worker_dead(self.controller, rank)
        worker_status.write_status(self.router.alive)  # /health answers 503 from now on
        # With every worker dead, a late-binding router also hands back what it held.
        held = self.dispatcher.take_held(lost)
        untracked = self.dispatcher.take_untracked(rank)
        logger.error("sglang-fair router: worker %d died; failing its %d requests in flight",
                     rank, len(lost) - len(held) + len(untracked))
        for rid in lost:
            message = "no live data-parallel worker" if rid in held else died(rank)
            self.replies.error(rid, self.dispatcher.reply_route.pop(rid, None), message)
        for rid, reply_to in untracked.items():
            self.replies.error(rid, reply_to, died(rank))
        if held:
            logger.error("sglang-fair router: no live worker left; failed %d held requests", len(held))
        # The tokenizer may be waiting on the dead worker's answer to a control message.
        self.replies.send(self.dead_rank_answers.died(rank))
        self.dispatcher.send_released()  # the survivors may take requests meant for the dead worker
