"""The controller's sockets to its workers, guarded so that a dead worker cannot block it.

SGLang's ``DataParallelController`` binds one PUSH socket per worker, with no
high-water mark, and sends on it blocking (``io_struct.sock_send``). A PUSH
socket with no connected peer blocks every send: once a worker's scheduler
dies, ZMQ drops its connection, and the next message for it (a dispatch, a
held request released to it, or SGLang's own abort broadcast) would block the
controller's loop for good, before the liveness check (every half second) can
tell the worker is dead. Every other worker's requests would then hang too.

``RouterBinding.attach`` puts a ``WorkerSocket`` in each slot of the
controller's ``workers``, so SGLang's sends and ours go through it. A send that
finds no peer waits for one, briefly and in steps, asking at each step whether
the worker is dead; a message for a dead (or long unreachable) worker is
dropped and the socket marked ``unreachable``. Dropping loses nothing: the
requests the message carried are in flight on that worker in the router's
books, and the controller fails them (HTTP 503) when it declares the worker
dead, which it does for an unreachable socket too.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable
from typing import Any

import zmq

from sglang_fair.binding.common import sglang_private

logger = logging.getLogger(__name__)

WAIT_STEP_MS = 100
GIVE_UP_S = 30.0  # a live worker's scheduler reconnects long before this (tcp under Ray)


class WorkerSocket:
    """One worker's PUSH socket; ``send``/``send_pyobj`` never block on a worker that is gone."""

    def __init__(self, rank: int, sock: zmq.Socket, is_dead: Callable[[int], bool],
                 give_up_s: float = GIVE_UP_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.rank = rank
        self.sock = sock
        self.is_dead = is_dead
        self.give_up_s = give_up_s
        self.clock = clock
        self.unreachable = False  # its worker is dead, or had no connection for give_up_s
        self.dropped = 0

    def send(self, data: Any, flags: int = 0, **kwargs: Any) -> None:
        self._deliver(lambda f: self.sock.send(data, flags=f, **kwargs), flags)

    def send_pyobj(self, obj: Any, flags: int = 0, protocol: int = pickle.DEFAULT_PROTOCOL, **kwargs: Any) -> None:
        self._deliver(lambda f: self.sock.send_pyobj(obj, flags=f, protocol=protocol, **kwargs), flags)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)

    def _deliver(self, send: Callable[[int], Any], flags: int) -> None:
        if flags & zmq.NOBLOCK:  # the caller handles zmq.Again itself
            send(flags)
            return
        started = self.clock()
        while not self.unreachable:
            try:
                send(flags | zmq.NOBLOCK)
                return
            except zmq.Again:
                pass  # no peer connected: the worker is gone, or reconnecting
            if self.is_dead(self.rank):
                self.unreachable = True
            elif self.clock() - started > self.give_up_s:
                logger.error("sglang-fair router: worker %d has taken no message for %.0f s; "
                             "treating it as dead", self.rank, self.give_up_s)
                self.unreachable = True
            else:
                self.sock.poll(WAIT_STEP_MS, zmq.POLLOUT)
        if self.dropped == 0:
            logger.warning("sglang-fair router: worker %d is gone; messages for it are dropped", self.rank)
        self.dropped += 1


def guard_worker_sockets(controller, is_dead: Callable[[int], bool]) -> list[WorkerSocket | None]:
    """Wrap each of ``controller.workers`` in place (None stays: a slot this node does not feed)."""
    guarded = [None if sock is None else WorkerSocket(rank, sock, is_dead)
               for rank, sock in enumerate(controller.workers)]
    return sglang_private.replace_worker_sockets(controller, guarded)
