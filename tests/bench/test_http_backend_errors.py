"""Replay client error paths, against the in-process fake in fake_server.py
(a real server cannot be made to time out, answer 500 or drop connections on
demand). Every call must end as exactly one record."""

import pytest

from sglang_fair.bench.http_backend import (
    ABORT_AFTER_CONNECTION_FAILURES,
    HttpBackend,
    _ServerError,
    _Throttled,
    refusal_in_stream,
)
from sglang_fair.workloads.model import Call, Program, Workload
from tests.bench.fake_server import FakeServer, free_port


def chain(pid, n=3, client="c", arrival=0.0):
    calls = [Call(tokens=(1, 2, 3), max_new_tokens=3)]
    calls += [Call(tokens=(4,), max_new_tokens=3, parents=(i,), extends_parent=True) for i in range(n - 1)]
    return Program(program_id=pid, client=client, arrival=arrival, calls=tuple(calls))


def run(url, programs, **kw):
    wl = Workload(name="t", programs=programs)
    result = HttpBackend(url, **kw).run(wl, progress=False)
    assert len(result.records) == wl.num_calls()
    assert len({r.rid for r in result.records}) == wl.num_calls()
    return result, {r.rid: r for r in result.records}


@pytest.fixture
def fake():
    with FakeServer() as server:
        yield server


def test_ok_chain_extends_parent_output(fake):
    result, recs = run(fake.url, [chain("ok/a")])
    assert not result.partial and all(r.ok for r in recs.values())
    # prompt grows by the parent's prompt + 3 output ids + 1 own token
    assert [recs[f"ok/a-{i}"].prompt_tokens for i in range(3)] == [3, 7, 11]
    assert all(r.output_tokens == 3 and r.t_first_token <= r.t_done for r in recs.values())


def test_server_500_fails_children_without_sending_them(fake):
    result, recs = run(fake.url, [chain("fail/a"), chain("ok/b")])
    assert result.partial
    assert recs["fail/a-0"].error.startswith("server error: HTTP 500")
    assert recs["fail/a-1"].error == "parent failed: fail/a-0"
    assert recs["fail/a-2"].error == "parent failed: fail/a-1"
    assert fake.received["fail/a-0"] == 1 and "fail/a-1" not in fake.received
    assert all(recs[f"ok/b-{i}"].ok for i in range(3))


def test_throttled_call_is_a_recorded_error_with_retry_after(fake):
    result, recs = run(fake.url, [chain("throttle/a"), chain("throttlenodate/b", n=1), chain("ok/c")])
    assert result.partial
    first = recs["throttle/a-0"]
    assert first.throttled and first.retry_after_s == 7.0 and not first.ok
    assert first.error.startswith("throttled: HTTP 429 (retry after 7 s)")
    assert fake.received["throttle/a-0"] == 1  # not retried
    assert recs["throttle/a-1"].error == "parent failed: throttle/a-0" and not recs["throttle/a-1"].throttled
    bare = recs["throttlenodate/b-0"]
    assert bare.throttled and bare.retry_after_s is None and "no Retry-After" in bare.error
    assert all(recs[f"ok/c-{i}"].ok and not recs[f"ok/c-{i}"].throttled for i in range(3))


def test_an_abort_inside_a_stream_is_not_a_served_call(fake):
    result, recs = run(fake.url, [chain("streamabort/a", n=2), chain("streamfail/b", n=1), chain("ok/c", n=1)])
    refused = recs["streamabort/a-0"]
    assert refused.throttled and refused.retry_after_s == 5.0 and refused.output_tokens == 0
    assert refused.error.startswith("throttled: HTTP 429 in stream (retry after 5 s): refused")
    assert recs["streamabort/a-1"].error == "parent failed: streamabort/a-0"
    failed = recs["streamfail/b-0"]
    assert not failed.throttled and failed.error == "server error: aborted in stream (status 503): refused"
    assert recs["ok/c-0"].ok and result.partial


def test_an_error_event_with_code_429_is_a_throttled_call():
    # The event SGLang's OpenAI routes stream for an abort with status 429 (serving_completions.py).
    protocol = pytest.importorskip("sglang.srt.entrypoints.openai.protocol")
    error = protocol.ErrorResponse(object="error", message="over the limit", type="TOO_MANY_REQUESTS",
                                   param=None, code=429)
    with pytest.raises(_Throttled, match="HTTP 429 in stream: over the limit"):
        refusal_in_stream({"error": error.model_dump()})
    with pytest.raises(_ServerError, match="engine crashed") as failed:
        refusal_in_stream({"error": {"message": "engine crashed", "code": 500}})
    assert not isinstance(failed.value, _Throttled)
    refusal_in_stream({"meta_info": {"finish_reason": {"type": "length", "length": 2}}})  # a finished call


def test_calls_carry_application_identity_headers(fake):
    prog = chain("ok/x;1", n=2, client="alice")
    prog = Program(prog.program_id, prog.client, prog.arrival, prog.calls, kind="summarize")
    result, recs = run(fake.url, [prog, chain("ok/plain", n=1)])
    assert not result.partial
    h0, h1 = fake.headers["ok/x;1-0"], fake.headers["ok/x;1-1"]
    assert h0["X-Client-Id"] == "alice" and h0["X-App-Id"] == "summarize"
    assert h0["X-Interaction-Id"] == h1["X-Interaction-Id"] == "ok/x%3B1"  # ';' would split the routing key
    assert (h0["X-Interaction-Stage"], h1["X-Interaction-Stage"]) == ("0", "1")
    assert "X-App-Id" not in fake.headers["ok/plain-0"]  # no kind, no app header


def test_timeout_is_recorded(fake):
    # 1.5 s: an ok reply must never time out, even on a busy machine
    result, recs = run(fake.url, [chain("slow/a", n=2), chain("ok/b", n=1)], timeout_s=1.5)
    assert recs["slow/a-0"].error == "timeout after 1.5s"
    assert recs["slow/a-1"].error.startswith("parent failed")
    assert recs["ok/b-0"].ok and result.partial


def test_error_event_mid_stream(fake):
    _, recs = run(fake.url, [chain("streamerr/a", n=1)])
    assert "engine crashed" in recs["streamerr/a-0"].error


def test_malformed_reply_costs_one_record(fake):
    result, recs = run(fake.url, [chain("garbage/a", n=2), chain("ok/b", n=1)])
    assert recs["garbage/a-0"].error.startswith("bad reply: AttributeError")
    assert recs["garbage/a-1"].error == "parent failed: garbage/a-0"
    assert recs["ok/b-0"].ok


def test_server_gone_mid_run_aborts_the_rest(fake):
    programs = [chain(f"drop/p{k}", n=1, arrival=0.01 * k) for k in range(20)]
    result, recs = run(fake.url, programs, concurrency=1)
    assert sum(fake.received.values()) == ABORT_AFTER_CONNECTION_FAILURES
    errors = [r.error for r in recs.values()]
    assert sum(e.startswith("connection error") for e in errors) == ABORT_AFTER_CONNECTION_FAILURES
    assert sum(e.startswith("run aborted") for e in errors) == 20 - ABORT_AFTER_CONNECTION_FAILURES
    assert any("stopped answering" in e for e in result.errors)


def test_unreachable_server():
    url = f"http://127.0.0.1:{free_port()}"
    result, recs = run(url, [chain("ok/a"), chain("ok/b", arrival=30.0)])  # no waiting for the late arrival
    assert result.partial and "unreachable" in result.errors[0]
    assert all(r.error.startswith("run aborted: server at") for r in recs.values())
