"""What the controller-side tests stand in for SGLang's DataParallelController (test support).

The router and SGLang's message types stay the real ones; the controller's
worker sockets are inproc PULL sinks, and the tokenizer's socket another.
"""

from __future__ import annotations

import types

import zmq

from sglang_fair.binding.controller.controller_binding import RouterBinding
from tests.support.inproc import fresh_inproc


class FakeController:
    """What RouterBinding touches of SGLang's DataParallelController."""

    def __init__(self, context, n: int) -> None:
        self.workers = []
        self.sinks = []
        for w in range(n):
            push, pull = context.socket(zmq.PUSH), context.socket(zmq.PULL)
            address = fresh_inproc(f"worker{w}")
            pull.bind(address)
            push.connect(address)
            self.workers.append(push)
            self.sinks.append(pull)
        self.status = [True] * n
        self.scheduler_procs = []
        self.refreshed = 0

    def _refresh_active_workers(self) -> None:
        self.refreshed += 1

    def _request_dispatcher(self, message) -> None:
        """SGLang's fallback for a control message: every worker counted active gets it."""
        for worker, active in zip(self.workers, self.status):
            if active:
                worker.send_pyobj(message)


def make_binding(router, controller_class: type[FakeController] = FakeController) -> RouterBinding:
    """A RouterBinding for ``router`` on a stand-in controller of as many workers, whose answers to
    the tokenizer arrive on ``binding.tokenizer_sink``; close it with ``binding.close()``."""
    context = zmq.Context.instance()
    binding = RouterBinding(router, context, context.socket(zmq.PULL), [])
    sink = context.socket(zmq.PULL)
    address = fresh_inproc("tokenizer")
    sink.bind(address)
    to_tokenizer = context.socket(zmq.PUSH)
    to_tokenizer.connect(address)
    binding.bind(controller_class(context, router.num_workers), to_tokenizer)
    binding.tokenizer_sink = sink
    return binding


def request(rid: str, ids: list[int], client: str = "alice", rank: int | None = None):
    """What the controller receives from the tokenizer for one request."""
    return types.SimpleNamespace(rid=rid, input_ids=ids, routing_key=client, http_worker_ipc=None,
                                 sampling_params=types.SimpleNamespace(max_new_tokens=8), routed_dp_rank=rank)
