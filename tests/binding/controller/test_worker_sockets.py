"""The controller's guarded worker sockets, on real ZMQ sockets and a worker process that is killed."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import threading
import time

import pytest

zmq = pytest.importorskip("zmq")

from sglang_fair.binding.controller.worker_sockets import WorkerSocket  # noqa: E402
from tests.support.clock import FakeClock  # noqa: E402

# A worker: connects, writes each message it gets to stdout (hex, one per line).
_WORKER = """
import sys, zmq
sock = zmq.Context().socket(zmq.PULL)
sock.connect(sys.argv[1])
while True:
    sys.stdout.write(sock.recv().hex() + "\\n")
    sys.stdout.flush()
"""


@pytest.fixture
def push(tmp_path):
    """A bound PUSH socket as SGLang's controller has one per worker, and a worker process on it."""
    context = zmq.Context()
    sock = context.socket(zmq.PUSH)
    sock.setsockopt(zmq.SNDHWM, 0)
    address = f"ipc://{tmp_path}/worker"
    sock.bind(address)
    worker = subprocess.Popen([sys.executable, "-c", _WORKER, address], stdout=subprocess.PIPE, text=True)
    yield sock, worker
    worker.kill()
    worker.wait()
    sock.close(linger=0)
    context.term()


def _received(worker) -> bytes:
    return bytes.fromhex(worker.stdout.readline().strip())


def _kill_and_wait_for_disconnect(sock, worker) -> None:
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 10
    while sock.poll(0, zmq.POLLOUT) and time.monotonic() < deadline:
        time.sleep(0.01)
    # Without a peer, a plain blocking send would now hang the caller for good.
    with pytest.raises(zmq.Again):
        sock.send(b"probe", flags=zmq.NOBLOCK)


def _finishes(fn, within: float) -> bool:
    done = threading.Event()
    thread = threading.Thread(target=lambda: (fn(), done.set()), daemon=True)
    thread.start()
    return done.wait(within)


def test_a_live_worker_gets_its_messages(push) -> None:
    sock, worker = push
    guarded = WorkerSocket(0, sock, is_dead=lambda rank: False)
    guarded.send(b"one")
    guarded.send_pyobj("two")
    assert _received(worker) == b"one"
    assert pickle.loads(_received(worker)) == "two"
    assert not guarded.unreachable and guarded.dropped == 0


def test_a_message_for_a_dead_worker_is_dropped_at_once(push, caplog) -> None:
    sock, worker = push
    guarded = WorkerSocket(1, sock, is_dead=lambda rank: worker.poll() is not None)
    guarded.send(b"before")
    assert _received(worker) == b"before"
    _kill_and_wait_for_disconnect(sock, worker)
    with caplog.at_level(logging.WARNING):
        assert _finishes(lambda: guarded.send(b"after"), within=5)
        assert _finishes(lambda: guarded.send_pyobj({"again": 1}), within=1)
    assert guarded.unreachable and guarded.dropped == 2
    assert caplog.text.count("worker 1 is gone") == 1


def test_a_worker_that_takes_nothing_for_long_is_given_up(push, caplog) -> None:
    sock, worker = push
    clock = FakeClock()
    asked_at = []

    def is_dead(rank: int) -> bool:  # each wait step asks once; the clock moves a second a step
        asked_at.append(clock.now)
        clock.advance(1.0)
        return False

    guarded = WorkerSocket(0, sock, is_dead=is_dead, give_up_s=3.0, clock=clock)
    _kill_and_wait_for_disconnect(sock, worker)
    with caplog.at_level(logging.ERROR):
        assert _finishes(lambda: guarded.send(b"x"), within=30)
    # Not given up at 3 s (not yet past give_up_s), given up at the first step past it.
    assert asked_at == [0.0, 1.0, 2.0, 3.0]
    assert guarded.unreachable and "has taken no message for 3 s" in caplog.text


def test_a_worker_that_reconnects_in_time_gets_the_message(push, tmp_path) -> None:
    sock, worker = push
    asked = []
    waiting = threading.Event()

    def is_dead(rank: int) -> bool:
        asked.append(rank)
        waiting.set()
        return False

    guarded = WorkerSocket(0, sock, is_dead=is_dead)
    _kill_and_wait_for_disconnect(sock, worker)
    address = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
    sender = threading.Thread(target=lambda: guarded.send(b"late"), daemon=True)
    sender.start()
    assert waiting.wait(10)  # the send waits, asking whether the worker is dead
    restarted = subprocess.Popen([sys.executable, "-c", _WORKER, address], stdout=subprocess.PIPE, text=True)
    try:
        assert _received(restarted) == b"late"
        sender.join(5)
        assert not sender.is_alive() and not guarded.unreachable and asked
    finally:
        restarted.kill()
        restarted.wait()


def test_a_non_blocking_send_is_the_callers_to_handle(push) -> None:
    sock, worker = push
    guarded = WorkerSocket(0, sock, is_dead=lambda rank: True)
    _kill_and_wait_for_disconnect(sock, worker)
    with pytest.raises(zmq.Again):
        guarded.send(b"x", flags=zmq.NOBLOCK)
    assert not guarded.unreachable
