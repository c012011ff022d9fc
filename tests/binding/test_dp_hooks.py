"""The DP-controller binding without a server: CLI, validation, dispatch, feedback, faults."""

from __future__ import annotations

import argparse
import json
import logging
import types

import msgspec
import pytest

pytestmark = pytest.mark.engine

zmq = pytest.importorskip("zmq")
pytest.importorskip("sglang.srt.managers.data_parallel_controller")

from sglang.srt.managers.data_parallel_controller import LoadBalanceMethod  # noqa: E402
from sglang.srt.managers.io_struct import AbortReq, sock_recv  # noqa: E402

from sglang_fair.binding import dp_controller as dpc  # noqa: E402
from sglang_fair.core.clients import normalize_client_id  # noqa: E402
from sglang_fair.router import make_router  # noqa: E402


def test_cli_accepts_the_new_methods_and_options() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load-balance-method", choices=["auto", "round_robin"], default="auto")
    dpc.extend_cli(None, parser)
    dpc.extend_cli(None, parser)  # twice (several processes parse): no duplicate options
    args = parser.parse_args(["--load-balance-method", "d2lpm", "--fair-router-quantum", "500"])
    assert args.load_balance_method == "d2lpm" and args.fair_router_quantum == 500.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--load-balance-method", "nope"])


def _namespace(**kw) -> argparse.Namespace:
    base = {"load_balance_method": "d2lpm", "dp_size": 2, "kv_events_config": None,
            "fair_router_quantum": None, "fair_router_options": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_prepare_validates_exports_and_turns_on_kv_events(monkeypatch) -> None:
    monkeypatch.setenv(dpc.KV_PORT_ENV, "33095")
    monkeypatch.delenv(dpc.CONFIG_ENV, raising=False)
    args = _namespace(fair_router_quantum=4096.0, fair_router_options='{"index_capacity_tokens": 1000}')
    dpc.prepare_router_args(None, args)
    config = json.loads(dpc.os.environ[dpc.CONFIG_ENV])
    assert config == {"method": "d2lpm", "options": {"index_capacity_tokens": 1000, "quantum": 4096.0}, "kv_port": 33095}
    kv = json.loads(args.kv_events_config)
    assert kv["endpoint"] == "tcp://127.0.0.1:33095" and kv["bind"] is False


def test_prepare_follows_user_kv_events(monkeypatch) -> None:
    monkeypatch.delenv(dpc.CONFIG_ENV, raising=False)
    user = '{"publisher": "zmq", "endpoint": "tcp://*:5557"}'
    args = _namespace(kv_events_config=user)
    dpc.prepare_router_args(None, args)
    assert args.kv_events_config == user
    assert "kv_port" not in json.loads(dpc.os.environ[dpc.CONFIG_ENV])


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"fair_router_quantum": 0.0}, "Q\\^w"),
        ({"fair_router_options": "{bad json"}, "not valid JSON"),
        ({"fair_router_options": '{"colour": 1}'}, "does not take option"),
        ({"fair_router_options": "[1]"}, "JSON object"),
    ],
)
def test_prepare_refuses_bad_options(kw, message, monkeypatch) -> None:
    monkeypatch.setenv(dpc.KV_PORT_ENV, "33095")
    with pytest.raises(SystemExit, match=message):
        dpc.prepare_router_args(None, _namespace(**kw))


def test_stock_methods_are_left_alone(monkeypatch) -> None:
    monkeypatch.delenv(dpc.CONFIG_ENV, raising=False)
    args = _namespace(load_balance_method="round_robin")
    dpc.prepare_router_args(None, args)
    assert args.kv_events_config is None and dpc.CONFIG_ENV not in dpc.os.environ
    assert dpc.resolve_method(LoadBalanceMethod.from_str.__func__, LoadBalanceMethod, "d2lpm") is LoadBalanceMethod.ROUND_ROBIN
    with pytest.raises(ValueError, match="Invalid load balance method"):
        dpc.resolve_method(LoadBalanceMethod.from_str.__func__, LoadBalanceMethod, "nope")


class FakeController:
    """What RouterBinding touches of SGLang's DataParallelController."""

    def __init__(self, context, n: int) -> None:
        self.workers = []
        self.sinks = []
        for w in range(n):
            push, pull = context.socket(zmq.PUSH), context.socket(zmq.PULL)
            pull.bind(f"inproc://worker{w}-{id(self)}")
            push.connect(f"inproc://worker{w}-{id(self)}")
            self.workers.append(push)
            self.sinks.append(pull)
        self.status = [True] * n
        self.scheduler_procs = []
        self.refreshed = 0

    def maybe_external_dp_rank_routing(self, req) -> bool:
        return False

    def _refresh_active_workers(self) -> None:
        self.refreshed += 1


@pytest.fixture
def binding():
    context = zmq.Context.instance()
    router = make_router("d2lpm", 2)
    feedback = context.socket(zmq.PULL)
    b = dpc.RouterBinding(router, context, feedback, [])
    b.controller = FakeController(context, 2)
    tokenizer = context.socket(zmq.PULL)
    tokenizer.bind(f"inproc://tokenizer-{id(b)}")
    b.to_tokenizer = context.socket(zmq.PUSH)
    b.to_tokenizer.connect(f"inproc://tokenizer-{id(b)}")
    b.tokenizer_sink = tokenizer
    yield b
    b.close()


def _req(rid: str, ids: list[int], client: str = "alice"):
    return types.SimpleNamespace(rid=rid, input_ids=ids, routing_key=client, http_worker_ipc=None,
                                 sampling_params=types.SimpleNamespace(max_new_tokens=8))


def _errors(b) -> list[AbortReq]:
    out = []
    while b.tokenizer_sink.poll(100):
        out.append(sock_recv(b.tokenizer_sink))
    return out


def test_dispatch_sends_to_the_routed_worker_and_completions_free_it(binding) -> None:
    binding.dispatch(_req("a", list(range(50))))
    assert binding.controller.sinks[0].poll(1000)
    assert binding.router.queue_sizes == [1, 0]
    binding.handle_feedback(msgspec.msgpack.encode(("done", 0, [("a", "alice", 12)])))
    assert binding.router.queue_sizes == [0, 0]
    binding.handle_feedback(msgspec.msgpack.encode(("done", 0, [("a", "alice", 12)])))  # duplicate: ignored
    binding.handle_feedback(b"\x00garbage")
    binding.handle_feedback(msgspec.msgpack.encode(("done", 9, [])))
    binding.handle_feedback(msgspec.msgpack.encode(("what", 0, 1)))
    assert binding.router.queue_sizes == [0, 0]


def test_dead_worker_fails_exactly_its_requests(binding) -> None:
    for i in range(4):
        binding.dispatch(_req(f"r{i}", [i] * 10, client=f"c{i}"))
    on_one = [rid for rid, d in binding.router.inflight.items() if d.worker == 1]
    assert on_one
    binding.worker_died(1)
    errors = _errors(binding)
    assert sorted(e.rid for e in errors) == sorted(on_one)
    assert all(e.finished_reason["status_code"] == 503 and "worker 1 died" in e.abort_message for e in errors)
    assert binding.controller.status == [True, False] and binding.controller.refreshed == 1
    binding.handle_feedback(msgspec.msgpack.encode(("done", 1, [(on_one[0], "c", 3)])))  # late: ignored
    binding.dispatch(_req("after", [1, 2, 3]))
    assert binding.router.inflight["after"].worker == 0
    binding.worker_died(0)
    binding.dispatch(_req("nowhere", [1]))
    assert [e.rid for e in _errors(binding)][-1] == "nowhere"


def test_a_router_failure_never_loses_the_request(binding, monkeypatch, caplog) -> None:
    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(binding.router, "route", boom)
    with caplog.at_level(logging.ERROR):
        binding.dispatch(_req("x", [1, 2]))
    assert binding.unrouted == 1
    assert any(sink.poll(500) for sink in binding.controller.sinks)


def test_silent_worker_is_reported_and_routing_continues(binding, caplog) -> None:
    binding.dispatch(_req("a", [1]))
    binding.last_report[0] -= 2 * dpc.SILENT_WORKER_WARN_S
    binding.worker_pids[1] = {dpc.os.getpid()}  # worker 1 announced itself, worker 0 never did
    with caplog.at_level(logging.WARNING):
        binding.check_workers(dpc.time.monotonic() + dpc.HELLO_WAIT_S + 1)
    assert "has not run a batch" in caplog.text
    assert "workers [0] never reported" in caplog.text
    binding.dispatch(_req("b", [2]))
    assert binding.router.queue_sizes == [1, 1]


class FakeReq:
    def __init__(self, rid: str, done: bool, out: int) -> None:
        self.rid, self._done, self.output_ids, self.routing_key = rid, done, [1] * out, "Alice Smith"

    def finished(self) -> bool:
        return self._done


def test_scheduler_side_reports_each_finished_request_once(monkeypatch) -> None:
    import sglang.srt.runtime_context as rc

    context = zmq.Context.instance()
    sink = context.socket(zmq.PULL)
    sink.bind("inproc://fair-router-feedback-test")
    monkeypatch.setenv(dpc.FEEDBACK_ENV, "inproc://fair-router-feedback-test")
    monkeypatch.setattr(rc, "get_parallel", lambda: types.SimpleNamespace(tp_rank=0, pp_rank=0, pp_size=1, dp_rank=1))
    monkeypatch.setattr(dpc, "_sender", False)
    try:
        dpc.announce_worker(None, object())
        reqs = [FakeReq("a", True, 5), FakeReq("b", False, 2)]
        dpc.report_finished(None, object(), reqs, False)
        dpc.report_finished(None, object(), reqs, False)  # "a" again: not reported twice
        dpc.report_aborted(None, object(), object(), FakeReq("c", True, 0))
        got = []
        while sink.poll(200):
            got.append(msgspec.msgpack.decode(sink.recv()))
    finally:
        sender = dpc._sender
        if sender:
            sender.close(linger=0)
        sink.close(linger=0)
    client = normalize_client_id("Alice Smith")  # the same id the local schedulers charge
    assert got == [["hello", 1, dpc.os.getpid()], ["done", 1, [["a", client, 5]]], ["done", 1, [["c", client, 0]]]]


def test_scheduler_side_is_inert_without_a_router(monkeypatch) -> None:
    monkeypatch.delenv(dpc.FEEDBACK_ENV, raising=False)
    monkeypatch.setattr(dpc, "_sender", False)
    dpc.report_finished(None, object(), [FakeReq("a", True, 1)], False)
    assert dpc._sender is None
