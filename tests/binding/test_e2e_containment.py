"""Nothing a client sends, and no failure of our code on one request, takes the real server down.

Two lines of defence, each tested on a real CPU server running DLPM:
* hostile input (identity headers, routing keys, bodies) is refused at the
  HTTP edge with 4xx, before it reaches the scheduler;
* a failure of sglang-fair's own code on one request (injected by
  ``tests/support/fault_injection``) answers that request with one error
  (HTTP 500) and the scheduler keeps serving everybody else.
"""

from __future__ import annotations

import json
import os
import random
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sglang_fair.testing.server import LocalServer

pytestmark = pytest.mark.server

FAULTS = Path(__file__).resolve().parents[1] / "support" / "fault_injection"


@pytest.fixture(scope="module")
def server():
    env = {"SGLANG_FAIR_TEST_FAULTS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(FAULTS), os.environ.get("PYTHONPATH")]))}
    with LocalServer(module="sglang_fair.launch_server", extra_args=["--policy", "dlpm"], env=env,
                     skip_tokenizer_init=True) as server:
        yield server


def _post(server, body: bytes, headers: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(server.url("/generate"), data=body, headers={"Content-Type": "application/json",
                                                                               **headers})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _body(input_ids=tuple(range(1, 20)), **fields) -> bytes:
    return json.dumps({"input_ids": list(input_ids), "sampling_params": {"max_new_tokens": 2}, **fields}).encode()


def _serves(server, client: str = "alice") -> bool:
    return _post(server, _body(), {"X-Client-Id": client})[0] == 200


def test_a_failure_of_our_code_fails_only_that_request(server):
    assert _serves(server)
    for client, where in (("boom", "on_queued"), ("bang", "check_arrival")):
        status, body = _post(server, _body(), {"X-Client-Id": client})
        assert status == 500 and f"injected fault in {where}" in body.decode(), (status, body)
        assert _serves(server)  # the scheduler survived
    assert server.poll() is None
    assert "scheduling request" in server.log_tail(2000)  # logged with its traceback


def _hostile_requests(seed: int, count: int) -> list[tuple[bytes, dict]]:
    rng = random.Random(seed)
    bad_values = ["²", "\xb2", "-1", "1e9", "9" * 40, " 3", "3 ", "", ";", "a;st=²", "x" * 5000, "\u202e", "0x10",
                  "ｘ", "NaN", "None", "[]", "{}"]
    headers = ["X-Client-Id", "X-App-Id", "X-Interaction-Id", "X-Interaction-Stage", "X-System-Prompt-Tokens"]
    out = []
    for _ in range(count):
        kind = rng.randrange(4)
        if kind == 0:  # hostile headers
            chosen = {name: rng.choice(bad_values) for name in rng.sample(headers, rng.randint(1, 3))}
            out.append((_body(), {k: v.encode("utf-8", "surrogatepass").decode("latin-1") for k, v in chosen.items()}))
        elif kind == 1:  # hostile routing keys in the body
            key = rng.choice(["mallory;st=²", "m;sys=-5", ";;;", "a;app=" + "z" * 3000, "b;ia=1;st=99999999999"])
            out.append((_body(routing_key=key), {}))
        elif kind == 2:  # bodies of the wrong shape
            out.append((rng.choice([b"{", b"[]", b'{"input_ids": "abc"}', b'{"input_ids": [1, -5]}',
                                    b'{"input_ids": [1], "sampling_params": {"max_new_tokens": -3}}',
                                    b'{"text": 5}', b"\xff\xfe"]), {}))
        else:  # out-of-vocabulary ids
            out.append((_body(input_ids=[1, 2, rng.choice([10 ** 7, 2 ** 40])]), {"X-Client-Id": "oov"}))
    return out


def test_hostile_requests_each_get_one_answer_and_the_server_keeps_serving(server):
    answers = []
    for body, headers in _hostile_requests(seed=14, count=60):
        status, _ = _post(server, body, headers)
        answers.append(status)
        # Refused at the edge, or served when harmless; never a server error, never a dead connection.
        assert status < 500, (status, body[:80], headers)
    assert any(400 <= s < 500 for s in answers)
    assert server.poll() is None and _serves(server, "after-the-storm")
