"""The completion side channel, scheduler side, without a server."""

from __future__ import annotations

import os
import types

import msgspec
import pytest

pytestmark = pytest.mark.engine

zmq = pytest.importorskip("zmq")
pytest.importorskip("sglang.srt.runtime_context")

from sglang_fair.binding.common import settings  # noqa: E402
from sglang_fair.binding.scheduler import router_reports  # noqa: E402
from sglang_fair.core.clients import normalize_client_id  # noqa: E402
from tests.support.inproc import fresh_inproc  # noqa: E402


class FakeReq:
    def __init__(self, rid: str, done: bool, out: int) -> None:
        self.rid, self._done, self.output_ids, self.routing_key = rid, done, [1] * out, "Alice Smith"

    def finished(self) -> bool:
        return self._done


def test_scheduler_side_reports_each_finished_request_once(monkeypatch) -> None:
    import sglang.srt.runtime_context as rc
    from sglang.srt.managers.io_struct import AbortReq

    context = zmq.Context.instance()
    sink = context.socket(zmq.PULL)
    address = fresh_inproc("fair-router-feedback")
    sink.bind(address)
    monkeypatch.setenv(settings.FEEDBACK_ENV, address)
    monkeypatch.setattr(rc, "get_parallel", lambda: types.SimpleNamespace(tp_rank=0, pp_rank=0, pp_size=1, dp_rank=1))
    monkeypatch.setattr(router_reports, "_REPORTER", None)
    try:
        router_reports.announce_worker(None, object())
        reqs = [FakeReq("a", True, 5), FakeReq("b", False, 2)]
        router_reports.report_finished(None, object(), reqs, False)
        router_reports.report_finished(None, object(), reqs, False)  # "a" again: not reported twice
        # Before SGLang 0.5.23 the hooked sender carries other replies too: only aborts count.
        router_reports.report_aborted(None, object(), object(), FakeReq("x", True, 3))
        router_reports.report_aborted(None, object(), AbortReq(rid="c"), FakeReq("c", True, 0))
        got = []
        while sink.poll(200):
            got.append(msgspec.msgpack.decode(sink.recv()))
    finally:
        router_reports.reporter().close()
        sink.close(linger=0)
    client = normalize_client_id("Alice Smith")  # the same id the local schedulers charge
    assert got == [["hello", 1, os.getpid()], ["done", 1, [["a", client, 5]]], ["done", 1, [["c", client, 0]]]]


def test_scheduler_side_is_inert_without_a_router(monkeypatch) -> None:
    monkeypatch.delenv(settings.FEEDBACK_ENV, raising=False)
    monkeypatch.setattr(router_reports, "_REPORTER", None)
    router_reports.report_finished(None, object(), [FakeReq("a", True, 1)], False)
    assert router_reports.reporter().sock is None
