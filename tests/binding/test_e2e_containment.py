"""Nothing a client sends, and no failure of our code on one request, takes the real server down.

Two lines of defence, each tested on a real CPU server running DLPM:
* hostile input (identity headers, routing keys, bodies) is refused at the
  HTTP edge with 4xx, before it reaches the scheduler;
* a failure of sglang-fair's own code on one request (injected by
  ``tests/support/fault_injection``) answers that request with one error
  (HTTP 500) and the scheduler keeps serving everybody else.
"""

from __future__ import annotations

import pytest

from tests.binding.hostile import generate_body, hostile_requests
from tests.support.http import call

pytestmark = pytest.mark.server

@pytest.fixture
def server(dlpm_server):
    """The shared DLPM server (tests/binding/conftest.py), whose processes carry the injected faults."""
    return dlpm_server


def _post(server, body: bytes, headers: dict) -> tuple[int, bytes]:
    reply = call(server.url("/generate"), body, headers)
    return reply.status, reply.body


def _serves(server, client: str = "alice") -> bool:
    return _post(server, generate_body(), {"X-Client-Id": client})[0] == 200


def test_a_failure_of_our_code_fails_only_that_request(server):
    assert _serves(server)
    for client, where in (("boom", "on_queued"), ("bang", "check_arrival")):
        status, body = _post(server, generate_body(), {"X-Client-Id": client})
        assert status == 500 and f"injected fault in {where}" in body.decode(), (status, body)
        assert _serves(server)  # the scheduler survived
    assert server.poll() is None
    assert "scheduling request" in server.log_tail(2000)  # logged with its traceback


def test_hostile_requests_each_get_one_answer_and_the_server_keeps_serving(server):
    answers = []
    for body, headers in hostile_requests(seed=14, count=60):
        status, _ = _post(server, body, headers)
        answers.append(status)
        # Refused at the edge, or served when harmless; never a server error, never a dead connection.
        assert status < 500, (status, body[:80], headers)
    assert any(400 <= s < 500 for s in answers)
    assert server.poll() is None and _serves(server, "after-the-storm")


def test_superscript_digits_are_refused_with_400_and_the_server_keeps_serving(server):
    # str.isdigit() accepts "²"; int() does not: this once killed the scheduler.
    status, body = _post(server, generate_body(), {"X-Client-Id": "mallory", "X-Interaction-Stage": "\xb2"})
    assert status == 400 and b"stage" in body.lower(), (status, body)
    status, body = _post(server, generate_body(routing_key="mallory;st=²"), {})
    assert status == 400, (status, body)
    assert _serves(server)
