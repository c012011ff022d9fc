"""Dispatch: the router places each request the tokenizer sends, in place of SGLang's dispatch.

Routers that hold requests (``Router.holds_requests``, late binding): a
request the router keeps (``route`` returns None) stays in the controller
until the router places it; after every call into the router (a dispatch, a
worker's report, an abort, a worker's death) the controller sends what
``take_released`` returns. An abort for a held request withdraws it from the
router (``cancel``) and answers it here, once; the abort still goes to the
workers for the requests they have.

Requests sent where the router does not track them (``routed_dp_rank``, a
router failure) are remembered per worker, so that a worker's death fails
them too.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable

from sglang_fair.binding.common import sglang_private
from sglang_fair.binding.common.request_identity import client_of
from sglang_fair.binding.controller.tokenizer_replies import TokenizerReplies, died
from sglang_fair.router import NoLiveWorkerError, Router

logger = logging.getLogger(__name__)


class Dispatcher:
    """Sends requests where the router places them; holds what it holds; remembers whom to answer."""

    def __init__(self, router: Router, controller: object, replies: TokenizerReplies) -> None:
        self.router = router
        self.controller = controller  # its ``workers``: one socket per rank
        self.replies = replies
        self.reply_route: dict[str, object] = {}  # rid -> http_worker_ipc, to send errors back
        self.held: dict[str, object] = {}  # rid -> request the router holds (late binding), not yet sent
        # rid -> (worker, http_worker_ipc) of requests sent where the router does not track them.
        self.untracked: dict[str, tuple[int, object]] = {}
        self.unrouted = 0  # requests a router failure sent round-robin (a metric)

    def dispatch(self, req: object) -> None:
        """One request from the tokenizer (SGLang's ``dispatching``, replaced)."""
        from sglang.srt.managers.io_struct import sock_send

        reply_to = getattr(req, "http_worker_ipc", None)
        if self.route_direct(req, reply_to):
            return
        rid = req.rid
        client = client_of(getattr(req, "routing_key", None))
        # SGLang carries input_ids as an array("q"): the index packs it with one copy.
        tokens = getattr(req, "input_ids", None)
        if tokens is None:
            tokens = ()
        sampling = getattr(req, "sampling_params", None)
        max_new = getattr(sampling, "max_new_tokens", None) or 0
        try:
            worker = self.router.route(rid, client, tokens, int(max_new))
        except NoLiveWorkerError as exc:
            self.replies.error(rid, reply_to, str(exc))
            return
        except Exception:
            # Never lose a request to a router bug: place it on a live worker untracked.
            logger.exception("sglang-fair router: route() failed for %r; sending it round-robin", rid)
            worker = self.fallback_worker()
            if worker is None:
                self.replies.error(rid, reply_to, "no live data-parallel worker")
                return
            self.unrouted += 1
            self.untracked[rid] = (worker, reply_to)
        else:
            self.reply_route[rid] = reply_to
            if worker is None:  # late binding: the router places it when a worker has room
                self.held[rid] = req
        if worker is not None:
            sock_send(self.controller.workers[worker], req)
        self.send_released()

    def route_direct(self, req: object, reply_to: object) -> bool:
        """``routed_dp_rank`` (external routing) is honoured first, untracked. A dead worker's
        rank is answered 503 here: SGLang's own check would raise and end the controller."""
        from sglang.srt.managers.io_struct import sock_send

        rank = getattr(req, "routed_dp_rank", None)
        if rank is None:
            return False
        if not 0 <= rank < self.router.num_workers:
            self.replies.error(req.rid, reply_to, f"no data-parallel worker {rank}")
        elif not self.router.alive[rank]:
            self.replies.error(req.rid, reply_to, died(rank))
        else:
            self.untracked[req.rid] = (rank, reply_to)
            sock_send(self.controller.workers[rank], req)
        return True

    def send_released(self) -> None:
        """Send the held requests the router placed since it was last asked (late binding)."""
        if not self.router.holds_requests:
            return
        from sglang.srt.managers.io_struct import sock_send

        for rid, worker in self.router.take_released():
            req = self.held.pop(rid, None)
            if req is None:
                logger.warning("sglang-fair router: released request %r was not held here; ignored", rid)
                continue
            sglang_private.rewrap_time_stats(req)
            sock_send(self.controller.workers[worker], req)

    def cancel_held(self, abort: object) -> None:
        """An ``AbortReq`` from the tokenizer: answer the requests it names that the router
        still holds (the workers never saw them). SGLang matches rids by prefix."""
        if not self.held or (not abort.abort_all and not abort.rid):
            return
        rids = [rid for rid in self.held if abort.abort_all or rid.startswith(abort.rid)]
        for rid in rids:
            if self.router.cancel(rid):
                del self.held[rid]
                self.replies.abort(rid, self.reply_route.pop(rid, None), abort.finished_reason, abort.abort_message)
        self.send_released()

    def fallback_worker(self) -> int | None:
        live = [w for w in range(self.router.num_workers) if self.router.alive[w]]
        return random.choice(live) if live else None

    def finished(self, rid: str) -> None:
        """A worker finished ``rid``: nothing more to answer for it."""
        self.reply_route.pop(rid, None)
        self.untracked.pop(rid, None)

    def take_held(self, rids: Iterable[str]) -> set[str]:
        """Of ``rids``, those held here, no longer held."""
        return {rid for rid in rids if self.held.pop(rid, None) is not None}

    def take_untracked(self, rank: int) -> dict[str, object]:
        """The untracked requests sent to ``rank`` (rid -> http_worker_ipc), forgotten."""
        on_rank = {rid: reply_to for rid, (worker, reply_to) in self.untracked.items() if worker == rank}
        for rid in on_rank:
            del self.untracked[rid]
        return on_rank
