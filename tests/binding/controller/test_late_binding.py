"""The DP-controller binding with a router that holds requests (``d2lpm_global``), without a server.

The router and SGLang's message types are the real ones; the controller is
the stand-in of stand_ins.py (its worker sockets are inproc PULL sinks),
and the workers' reports are the bytes the scheduler-side hooks send.
"""

from __future__ import annotations

import os
import types

import msgspec
import pytest

pytestmark = pytest.mark.engine

zmq = pytest.importorskip("zmq")
pytest.importorskip("sglang.srt.managers.data_parallel_controller")

from sglang.srt.managers.io_struct import AbortReq, sock_recv, unwrap_from_pickle, wrap_as_pickle  # noqa: E402

from sglang_fair.binding.controller.controller_binding import RouterBinding  # noqa: E402
from sglang_fair.binding.common import settings  # noqa: E402
from sglang_fair.binding.scheduler import router_reports  # noqa: E402
from sglang_fair.binding.common.settings import ROUTER_ENV  # noqa: E402
from sglang_fair.router import make_router  # noqa: E402
from tests.binding.controller.stand_ins import FakeController, make_binding, request as _req  # noqa: E402
from tests.support.inproc import fresh_inproc  # noqa: E402


class DispatchingController(FakeController):
    """Also records what SGLang's own dispatcher would get (aborts go to every worker)."""

    def __init__(self, context, n: int) -> None:
        super().__init__(context, n)
        self.dispatched = []

    def _request_dispatcher(self, msg) -> None:
        self.dispatched.append(msg)


@pytest.fixture
def binding():
    # One request per worker's local queue: the third concurrent request waits in the router.
    b = make_binding(make_router("d2lpm_global", 2, local_queue_requests=1), DispatchingController)
    yield b
    b.close()


def _received(b, worker: int) -> list[str]:
    """Rids the worker's socket received so far."""
    sink, out = b.controller.sinks[worker], []
    while sink.poll(100):
        out.append(sock_recv(sink).rid)
    return out


def _answers(b) -> list[AbortReq]:
    out = []
    while b.tokenizer_sink.poll(100):
        out.append(sock_recv(b.tokenizer_sink))
    return out


def _report(b, kind: str, rank: int, items: list) -> None:
    b.worker_feedback.handle(msgspec.msgpack.encode((kind, rank, items)))


def _fill(b) -> dict[str, int]:
    """Alice's three requests: two placed (one per worker), one held. rid -> worker."""
    for i in range(3):
        b.dispatcher.dispatch(_req(f"r{i}", [100 * i + j for j in range(20)], client="alice"))
    placed = {rid: d.worker for rid, d in b.router.inflight.items()}
    assert len(placed) == 2 and set(placed.values()) == {0, 1}
    assert list(b.dispatcher.held) == [next(f"r{i}" for i in range(3) if f"r{i}" not in placed)]
    return placed


def test_a_held_request_is_sent_once_an_admission_makes_room(binding) -> None:
    placed = _fill(binding)
    assert sorted(_received(binding, 0) + _received(binding, 1)) == sorted(placed)
    (held,) = binding.dispatcher.held
    req = binding.dispatcher.held[held]
    req.time_stats = {"queued_at": 1.0}  # unwrapped, as SGLang's dispatch wrapper leaves it
    rid, worker = next(iter(placed.items()))
    _report(binding, "admitted", worker, [(rid, 0)])
    assert binding.dispatcher.held == {} and binding.router.inflight[held].worker == worker
    assert _received(binding, worker) == [held]
    # Wrapped again as SGLang sends it (a PickleWrapper unless SGLANG_USE_PICKLE_IPC pickles whole messages).
    assert type(req.time_stats) is type(wrap_as_pickle({})) and unwrap_from_pickle(req.time_stats) == {"queued_at": 1.0}
    assert binding.router.snapshot().held_requests == 0


def test_progress_charges_the_clients_cluster_deficit(binding) -> None:
    placed = _fill(binding)
    rid, worker = next(iter(placed.items()))
    client = binding.router.inflight[rid].client
    _report(binding, "admitted", worker, [(rid, 0)])  # also releases the held request (charged now)
    before = binding.router.snapshot().client_deficits[client]
    _report(binding, "progress", worker, [(rid, 5)])
    _report(binding, "progress", worker, [(rid, 5)])  # cumulative: the same count is not charged twice
    assert binding.router.snapshot().client_deficits[client] == before - 2.0 * 5
    _report(binding, "done", worker, [(rid, client, 7)])
    assert binding.router.snapshot().client_deficits[client] == before - 2.0 * 7
    assert rid not in binding.dispatcher.reply_route


def test_an_abort_of_a_held_request_answers_it_once_and_it_never_reaches_a_worker(binding) -> None:
    placed = _fill(binding)
    (held,) = binding.dispatcher.held
    binding.loop.receive(AbortReq(rid=held))
    (answer,) = _answers(binding)
    assert answer.rid == held and answer.finished_reason is None  # SGLang's own abort answer
    assert isinstance(binding.controller.dispatched[-1], AbortReq)  # still broadcast to the workers
    assert binding.dispatcher.held == {} and binding.router.snapshot().held_requests == 0
    for rid, worker in placed.items():  # room again: nothing is left to send
        _report(binding, "admitted", worker, [(rid, 0)])
    assert held not in _received(binding, 0) + _received(binding, 1)
    # An abort of a placed request is the worker's to answer.
    binding.loop.receive(AbortReq(rid=next(iter(placed))))
    assert _answers(binding) == []


def test_abort_all_answers_every_held_request(binding) -> None:
    _fill(binding)
    binding.dispatcher.dispatch(_req("late", [9] * 20, client="c9"))
    held = sorted(binding.dispatcher.held)
    assert len(held) == 2
    binding.loop.receive(AbortReq(abort_all=True))
    assert sorted(a.rid for a in _answers(binding)) == held
    assert binding.dispatcher.held == {}


def test_when_every_worker_dies_held_requests_get_an_error(binding) -> None:
    placed = _fill(binding)
    (held,) = binding.dispatcher.held
    on_one = [rid for rid, w in placed.items() if w == 1]
    binding.health.worker_died(1)
    # Worker 0 has no room yet: the request stays held; worker 1's request fails.
    assert [a.rid for a in _answers(binding)] == on_one and list(binding.dispatcher.held) == [held]
    binding.health.worker_died(0)
    answers = {a.rid: a for a in _answers(binding)}
    assert set(answers) == {held, *(rid for rid, w in placed.items() if w == 0)}
    assert answers[held].finished_reason["status_code"] == 503
    assert "no live data-parallel worker" in answers[held].abort_message
    assert binding.dispatcher.held == {} and binding.dispatcher.reply_route == {}


def test_only_a_holding_router_asks_workers_for_admissions_and_progress(monkeypatch) -> None:
    monkeypatch.delenv(ROUTER_ENV, raising=False)  # each method with its defaults
    server_args = types.SimpleNamespace(kv_events_config=None)
    for method, expected in (("d2lpm_global", "1"), ("d2lpm", None)):
        b = RouterBinding.create(method, 2, server_args)
        try:
            assert os.environ.get(settings.LATE_BINDING_ENV) == expected, method
        finally:
            b.close()


class FakeReq:
    """What the scheduler-side hooks read of SGLang's ``Req``."""

    def __init__(self, rid: str, prompt: int, cached: int, out: int = 0) -> None:
        self.rid, self.origin_input_ids, self.prefix_len = rid, [1] * prompt, cached
        self.output_ids, self.routing_key, self._done = [2] * out, "alice", False

    def finished(self) -> bool:
        return self._done


@pytest.fixture
def scheduler_side(monkeypatch):
    """The scheduler-side hooks of rank 1, pushing to a sink; late binding on."""
    import sglang.srt.runtime_context as rc

    context = zmq.Context.instance()
    sink = context.socket(zmq.PULL)
    endpoint = fresh_inproc("late-binding-feedback")
    sink.bind(endpoint)
    monkeypatch.setenv(settings.FEEDBACK_ENV, endpoint)
    monkeypatch.setenv(settings.LATE_BINDING_ENV, "1")
    monkeypatch.setattr(rc, "get_parallel", lambda: types.SimpleNamespace(tp_rank=0, pp_rank=0, pp_size=1, dp_rank=1))
    monkeypatch.setattr(router_reports, "_REPORTER", None)

    def received() -> list:
        out = []
        while sink.poll(200):
            out.append(msgspec.msgpack.decode(sink.recv()))
        return out

    yield received
    router_reports.reporter().close()
    sink.close(linger=0)


def test_schedulers_report_first_admissions_first_tokens_and_progress_every_few_tokens(scheduler_side) -> None:
    a, b = FakeReq("a", prompt=50, cached=32), FakeReq("b", prompt=10, cached=0)
    plan = types.SimpleNamespace(batch_to_run=types.SimpleNamespace(reqs=[a, b]))
    router_reports.report_admitted(plan, object())
    router_reports.report_admitted(plan, object())  # a chunk or a re-admission: not reported again
    router_reports.report_admitted(types.SimpleNamespace(batch_to_run=None), object())
    n = router_reports.PROGRESS_EVERY_TOKENS
    batch = types.SimpleNamespace(reqs=[a, b])
    for step in range(2 * n):
        a.output_ids.append(3)
        if step == n:
            b._done = True  # finished requests are reported as done, not as progress
        elif step < n:
            b.output_ids.extend([3, 3])  # speculative decoding: several tokens a step
        router_reports.report_progress(None, object(), batch)
    assert n == 8  # the router's default finishing window: a request running to max_new is reported inside it
    assert scheduler_side() == [
        ["admitted", 1, [["a", 32], ["b", 0]]],
        ["progress", 1, [["a", 1], ["b", 2]]],  # first tokens at once, one message for the batch
        ["progress", 1, [["b", 2 + n]]],
        ["progress", 1, [["a", 1 + n]]],
    ]


def test_schedulers_send_nothing_more_for_a_router_that_places_at_once(scheduler_side, monkeypatch) -> None:
    monkeypatch.delenv(settings.LATE_BINDING_ENV)
    req = FakeReq("a", prompt=5, cached=0, out=1)
    router_reports.report_admitted(types.SimpleNamespace(batch_to_run=types.SimpleNamespace(reqs=[req])), object())
    for _ in range(router_reports.PROGRESS_EVERY_TOKENS):
        req.output_ids.append(3)
        router_reports.report_progress(None, object(), types.SimpleNamespace(reqs=[req]))
    assert scheduler_side() == []


def test_a_run_time_settings_change_reaches_the_router_and_the_workers(binding) -> None:
    from sglang.srt.managers.io_struct import SetInternalStateReq

    change = SetInternalStateReq(server_args={"fair_settings": {"quantum": 777, "client_weights": {"alice": 3}}})
    binding.loop.receive(change)
    assert binding.router.fair.settings()["quantum"] == 777.0
    assert binding.router.fair.options.weight_of("alice") == 3.0
    assert binding.controller.dispatched == [change]  # SGLang's dispatcher still sends it to every worker
    bad = SetInternalStateReq(server_args={"fair_settings": {"quantum": -1}})
    binding.loop.receive(bad)  # refused here (logged); the schedulers refuse it too
    assert binding.router.fair.settings()["quantum"] == 777.0
    assert binding.controller.dispatched == [change, bad]
