"""The HTTP edge of the real server: FairServe's throttle (HTTP 429 with Retry-After, never
inside an interaction), header validation, and input that must not crash the server; on a
stock SGLang (the plugin's hooks) and on one built from patches/ (the same calls in its source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_fair.bench.http_backend import HttpBackend
from sglang_fair.testing.server import LocalServer
from sglang_fair.workloads.model import Call, Program, Workload
from tests.support.http import call

pytestmark = pytest.mark.server


def _post(server, client: str, headers: dict | None = None, input_ids=tuple(range(1, 30))):
    body = {"input_ids": list(input_ids), "sampling_params": {"max_new_tokens": 2}}
    reply = call(server.url("/generate"), body, {"X-Client-Id": client, **(headers or {})})
    return reply.status, reply.headers


def _check_build(server: LocalServer, via: str) -> LocalServer:
    log = Path(server.log_path).read_text()
    assert "schedule policy fairserve (gated), quantum=" in log
    assert f"via {via}" in log  # the build this parameter means ran
    return server


# Both builds are shared servers: the stock one (tests/binding/conftest.py) and the patched one (tests/conftest.py).
# Each test asks for both, so the pool sees every user of each (it stops a server after its last).
@pytest.fixture(params=["stock", "patched"])
def server(request, fairserve_server, patched_fairserve_server):
    if request.param == "stock":
        return _check_build(fairserve_server, "the plugin's hooks")
    return _check_build(patched_fairserve_server, "the patched SGLang source (patches/)")


def test_out_of_vocabulary_ids_are_refused_and_the_server_survives(server):
    status, _ = _post(server, "careless", input_ids=[5, 6, 99999])
    assert status == 400
    assert _post(server, "someone-else")[0] == 200


def test_throttle_answers_429_with_retry_after(server):
    assert _post(server, "abuser")[0] == 200
    status, headers = _post(server, "abuser")
    assert status == 429
    assert 1 <= int(headers["retry-after"]) <= 60
    assert _post(server, "benign")[0] == 200  # limits are per user
    # A call that continues an interaction already started is never throttled.
    ia = {"X-App-Id": "agent", "X-Interaction-Id": "run-1", "X-Interaction-Stage": "0"}
    assert _post(server, "agent-user", ia)[0] == 200
    assert _post(server, "agent-user", {**ia, "X-Interaction-Stage": "1"})[0] == 200
    # A bad header is refused before scheduling.
    assert _post(server, "agent-user", {"X-Interaction-Stage": "-3"})[0] == 400


def test_a_streamed_call_the_throttle_refuses_is_recorded_as_throttled(server):
    # A streamed answer has already said HTTP 200 when the throttle refuses the call: the
    # refusal travels as the stream's abort event. (These servers have no tokenizer, which the
    # OpenAI routes need; their error event is checked in tests/bench/test_http_backend_errors.py.)
    calls = (Call(tokens=tuple(range(1, 30)), max_new_tokens=2),)
    wl = Workload(name="t", programs=[Program(f"stream-abuser-{k}", "stream-abuser", 0.5 * k, calls)
                                      for k in range(2)])
    records = sorted(HttpBackend(server.base_url, timeout_s=60).run(wl, progress=False).records,
                     key=lambda r: r.t_sent)
    assert records[0].ok and records[0].output_tokens == 2, records[0].error
    refused = records[1]
    assert refused.throttled and not refused.ok and refused.output_tokens == 0
    assert refused.error.startswith("throttled: HTTP 429 in stream (retry after ")
    assert 1 <= refused.retry_after_s <= 60


def _raw_post(server, body: bytes) -> tuple[int, str]:
    reply = call(server.url("/generate"), body, timeout=60)
    return reply.status, reply.body.decode()


@pytest.mark.parametrize("body, named", [
    ({"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 1.5}}, "sampling_params.max_new_tokens: "),
    ({"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 2 ** 70}}, "sampling_params.max_new_tokens: "),
    ({"input_ids": [5, 6], "sampling_params": {"temperature": "hot"}}, "sampling_params.temperature: "),
    ({"input_ids": [5, 6], "stream": "yes"}, "stream: "),
    ({"input_ids": [5, 6], "sampling_params": [{"top_k": 0.5}]}, "sampling_params[0].top_k: "),
    ({"input_ids": "abc"}, "input_ids: "),
    ({"input_ids": [5, 6], "rid": 5}, "rid: "),
    ([1, 2], "body: "),
])
def test_type_errors_name_the_field_and_carry_no_source_path(server, body, named):
    status, text = _raw_post(server, json.dumps(body).encode())
    assert status == 400
    assert named in text, text
    assert ".py" not in text and 'File \\"' not in text, text
    assert "i64" not in text and "f64" not in text, text


def test_malformed_json_is_refused_without_source_path(server):
    status, text = _raw_post(server, b"{not json")
    assert status == 400 and "body: " in text and ".py" not in text, text
