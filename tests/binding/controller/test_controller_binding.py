"""The DP-controller binding (``RouterBinding`` and its managers) without a server: dispatch, feedback, faults."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import types

import msgspec
import pytest

pytestmark = pytest.mark.engine

zmq = pytest.importorskip("zmq")
pytest.importorskip("sglang.srt.managers.data_parallel_controller")

from sglang.srt.managers.io_struct import AbortReq, sock_recv  # noqa: E402

from sglang_fair.binding.controller.worker_liveness import (HELLO_WAIT_S, SILENT_WORKER_WARN_S, RayLiveness,  # noqa: E402
                                                 loops_per_rank)
from sglang_fair.binding.controller.worker_sockets import guard_worker_sockets  # noqa: E402
from sglang_fair.router import make_router  # noqa: E402
from tests.binding.controller.stand_ins import make_binding, request as _req  # noqa: E402
from tests.support.inproc import fresh_inproc  # noqa: E402


@pytest.fixture
def binding():
    b = make_binding(make_router("d2lpm", 2))
    yield b
    b.close()


def _errors(b) -> list[AbortReq]:
    out = []
    while b.tokenizer_sink.poll(100):
        out.append(sock_recv(b.tokenizer_sink))
    return out


def test_dispatch_sends_to_the_routed_worker_and_completions_free_it(binding) -> None:
    binding.dispatcher.dispatch(_req("a", list(range(50))))
    assert binding.controller.sinks[0].poll(1000)
    assert binding.router.queue_sizes == [1, 0]
    binding.worker_feedback.handle(msgspec.msgpack.encode(("done", 0, [("a", "alice", 12)])))
    assert binding.router.queue_sizes == [0, 0]
    binding.worker_feedback.handle(msgspec.msgpack.encode(("done", 0, [("a", "alice", 12)])))  # duplicate: ignored
    binding.worker_feedback.handle(b"\x00garbage")
    binding.worker_feedback.handle(msgspec.msgpack.encode(("done", 9, [])))
    binding.worker_feedback.handle(msgspec.msgpack.encode(("what", 0, 1)))
    assert binding.router.queue_sizes == [0, 0]


def test_two_interactions_of_one_client_share_one_d2lpm_deficit(binding) -> None:
    from sglang_fair.binding.http.identity import encode_identity
    from sglang_fair.binding.scheduler.router_reports import _report

    keys = [encode_identity("alice", {"x-app-id": "agent", "x-interaction-id": f"run-{i}"}) for i in range(2)]
    for i, key in enumerate(keys):
        binding.dispatcher.dispatch(_req(f"r{i}", list(range(100 * i, 100 * i + 40)), client=key))
    # One set of per-worker deficits, alice's, paid for both interactions.
    assert set(binding.router.deficits) == {"alice"}
    # The schedulers' reports name the same client for either interaction.
    finished = [_report(types.SimpleNamespace(rid=f"r{i}", routing_key=key, output_ids=[1, 2]))
                for i, key in enumerate(keys)]
    assert [client for _, client, _ in finished] == ["alice", "alice"]


def test_dead_worker_fails_exactly_its_requests(binding) -> None:
    for i in range(4):
        binding.dispatcher.dispatch(_req(f"r{i}", [i] * 10, client=f"c{i}"))
    on_one = [rid for rid, d in binding.router.inflight.items() if d.worker == 1]
    assert on_one
    binding.health.worker_died(1)
    errors = _errors(binding)
    assert sorted(e.rid for e in errors) == sorted(on_one)
    assert all(e.finished_reason["status_code"] == 503 and "worker 1 died" in e.abort_message for e in errors)
    assert binding.controller.status == [True, False] and binding.controller.refreshed == 1
    binding.worker_feedback.handle(msgspec.msgpack.encode(("done", 1, [(on_one[0], "c", 3)])))  # late: ignored
    binding.dispatcher.dispatch(_req("after", [1, 2, 3]))
    assert binding.router.inflight["after"].worker == 0
    binding.health.worker_died(0)
    binding.dispatcher.dispatch(_req("nowhere", [1]))
    assert [e.rid for e in _errors(binding)][-1] == "nowhere"


def test_a_control_message_a_worker_dies_with_is_answered_for_it(binding) -> None:
    """The tokenizer waits for one answer per rank, one call of a kind at a time: a worker that
    dies holding a state request must not leave that call, and every later one, waiting."""
    from sglang.srt.managers.io_struct import (FlushCacheReqInput, FlushCacheReqOutput, GetInternalStateReq,
                                               GetInternalStateReqOutput, SetInternalStateReq,
                                               SetInternalStateReqOutput)

    binding.loop.receive(GetInternalStateReq())
    binding.loop.receive(GetInternalStateReq())  # the latest of a kind is the one a call may wait on
    binding.loop.receive(SetInternalStateReq(server_args={"max_micro_batch_size": 2}, http_worker_ipc="ipc://http-1"))
    assert all(sink.poll(1000) for sink in binding.controller.sinks)  # both workers were sent them
    assert _errors(binding) == []  # nothing owed while both live
    binding.health.worker_died(1)
    owed = _errors(binding)
    assert sorted(type(a).__name__ for a in owed) == ["GetInternalStateReqOutput", "SetInternalStateReqOutput"]
    state = next(a for a in owed if isinstance(a, GetInternalStateReqOutput))
    assert state.internal_state == {"dp_rank": 1, "dead_worker": True}
    applied = next(a for a in owed if isinstance(a, SetInternalStateReqOutput))
    assert applied.updated is False and applied.http_worker_ipc == "ipc://http-1"  # to the HTTP worker that asked
    binding.health.worker_died(1)  # declared twice: nothing owed twice
    assert [a for a in _errors(binding) if not isinstance(a, AbortReq)] == []

    # From now on every control message the tokenizer fans out is answered for the dead worker at once.
    binding.loop.receive(FlushCacheReqInput())
    binding.loop.receive(GetInternalStateReq())
    answers = _errors(binding)
    assert [type(a) for a in answers] == [FlushCacheReqOutput, GetInternalStateReqOutput]
    assert answers[0].success is False and "worker 1 died" in answers[0].message
    binding.loop.receive(AbortReq(rid="x"))  # not a fanned-out call: no answer of ours
    assert _errors(binding) == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_worker_dead_before_anyone_noticed_blocks_nothing_and_loses_nothing(binding) -> None:
    # Worker 1's scheduler died: its PUSH socket has no peer left, on which a
    # plain send blocks for good; the liveness check has not run yet.
    context = zmq.Context.instance()
    orphan = context.socket(zmq.PUSH)
    orphan.bind(fresh_inproc("dead-worker"))
    binding.controller.workers[1] = orphan
    binding.health.worker_sockets = guard_worker_sockets(binding.controller, binding.health.is_dead)
    binding.health.liveness.worker_pids.update({0: {os.getpid()}, 1: {_dead_pid()}})

    def send_all() -> None:
        for i in range(6):
            binding.dispatcher.dispatch(_req(f"r{i}", [i] * 10, client=f"c{i}"))
        binding.dispatcher.dispatch(_req("direct", [7, 8], rank=1))

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    sender.join(10)
    assert not sender.is_alive(), "the controller blocked on the dead worker's socket"
    on_one = [rid for rid, d in binding.router.inflight.items() if d.worker == 1]
    assert on_one and binding.health.worker_sockets[1].unreachable
    binding.health.check_workers(time.monotonic())
    assert binding.router.alive == [True, False]
    errors = _errors(binding)
    assert sorted(e.rid for e in errors) == sorted(on_one + ["direct"])
    assert all("worker 1 died" in e.abort_message for e in errors)


def test_external_rank_routing_is_honoured_and_a_dead_rank_answered(binding) -> None:
    binding.health.worker_sockets = guard_worker_sockets(binding.controller, binding.health.is_dead)
    binding.dispatcher.dispatch(_req("to-one", [1, 2], rank=1))
    assert binding.controller.sinks[1].poll(1000)
    assert binding.router.queue_sizes == [0, 0]  # untracked by the router
    binding.dispatcher.dispatch(_req("to-zero", [1, 2], rank=0))
    binding.worker_feedback.handle(msgspec.msgpack.encode(("done", 0, [("to-zero", "alice", 3)])))
    binding.health.worker_died(1)
    assert [(e.rid, e.finished_reason["status_code"]) for e in _errors(binding)] == [("to-one", 503)]
    binding.dispatcher.dispatch(_req("late", [1], rank=1))
    binding.health.worker_died(0)  # to-zero had finished: nothing left to fail
    assert [(e.rid, e.abort_message) for e in _errors(binding)] == [("late", "data-parallel worker 1 died")]


def test_a_router_failure_never_loses_the_request(binding, monkeypatch, caplog) -> None:
    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(binding.router, "route", boom)
    with caplog.at_level(logging.ERROR):
        binding.dispatcher.dispatch(_req("x", [1, 2]))
    assert binding.dispatcher.unrouted == 1
    assert any(sink.poll(500) for sink in binding.controller.sinks)


def test_a_router_failure_on_a_report_does_not_end_the_controller(binding, monkeypatch, caplog) -> None:
    binding.dispatcher.dispatch(_req("a", [1, 2, 3]))
    monkeypatch.setattr(binding.router, "on_finish", lambda *a, **k: 1 / 0)
    with caplog.at_level(logging.ERROR):
        binding.worker_feedback.handle(msgspec.msgpack.encode(("done", 0, [("a", "alice", 4)])))
    assert "a Done report from worker 0 failed in the router; ignored" in caplog.text
    assert "ZeroDivisionError" in caplog.text
    binding.dispatcher.dispatch(_req("b", [4, 5, 6]))  # the controller routes on
    assert "b" in binding.router.inflight


def test_silent_worker_is_reported_and_routing_continues(binding, caplog) -> None:
    binding.dispatcher.dispatch(_req("a", [1]))
    binding.health.liveness.last_report[0] -= 2 * SILENT_WORKER_WARN_S
    binding.health.liveness.worker_pids[1] = {os.getpid()}  # worker 1 announced itself, worker 0 never did
    with caplog.at_level(logging.WARNING):
        binding.health.check_workers(time.monotonic() + HELLO_WAIT_S + 1)
    assert "has not run a batch" in caplog.text
    assert "workers [0] never reported" in caplog.text
    binding.dispatcher.dispatch(_req("b", [2]))
    assert binding.router.queue_sizes == [1, 1]


def test_under_ray_a_worker_whose_actor_loop_ended_is_dead(binding, monkeypatch) -> None:
    # SGLang's Ray controller launches rank by rank, tp x pp actors each; an
    # actor's event loop only returns when the actor is gone.
    refs = ["r0-tp0", "r0-tp1", "r1-tp0", "r1-tp1"]
    loops = loops_per_rank(refs, 2)
    assert loops == [["r0-tp0", "r0-tp1"], ["r1-tp0", "r1-tp1"]]
    binding.health.liveness = RayLiveness(2, time.monotonic(), loops)
    ended = {"r1-tp1"}

    def wait(refs, num_returns, timeout):
        assert timeout == 0  # never blocks the controller
        return [r for r in refs if r in ended], [r for r in refs if r not in ended]

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(wait=wait))
    for i in range(4):
        binding.dispatcher.dispatch(_req(f"r{i}", [i] * 10, client=f"c{i}"))
    on_one = sorted(rid for rid, d in binding.router.inflight.items() if d.worker == 1)
    binding.health.liveness.worker_pids[0] = {2**22 + 12345}  # a pid that is not this node's: ignored under Ray
    binding.health.check_workers(time.monotonic())
    assert binding.router.alive == [True, False]
    assert sorted(e.rid for e in _errors(binding)) == on_one
