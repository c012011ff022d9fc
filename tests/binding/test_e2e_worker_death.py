"""A worker that stops answering, then dies with an info call outstanding, on the real CPU server at --dp 2.

``python -m sglang_fair.launch_server --policy dlpm --dp 2 --admin-api-key K``
(the session's shared server, taken once every other test is done with it)
with no traffic. SGLang's tokenizer waits for one answer per rank to an info
or admin call (``/server_info``, ``/fair/settings``), one call of a kind at a
time:

1. worker 1 is stopped (SIGSTOP): a call answers at the deadline
   (``SGLANG_FAIR_STATE_DEADLINE_S``, 3 s here) with worker 0's state and
   worker 1 named as not answering; the worker is then let go on (SIGCONT)
   and its late answer changes nothing;
2. worker 1 is stopped again, calls are sent (they reach it and wait), and it
   is killed (SIGKILL): the controller notices within 2 s with no traffic at
   all, and answers the outstanding calls for it (its answer, not the
   deadline's), and every later call at once; worker 0 keeps serving and
   SIGTERM ends the server.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import time

import pytest

pytestmark = pytest.mark.server

from sglang_fair.testing.server import LocalServer  # noqa: E402
from tests.support.http import call  # noqa: E402
from tests.support.servers import ADMIN_KEY, STATE_DEADLINE_S  # noqa: E402

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
DEADLINE_S = STATE_DEADLINE_S


def _get(server: LocalServer, path: str, headers: dict | None = None, timeout: float = 60) -> tuple[int, dict, float]:
    reply = call(server.url(path), headers=headers, timeout=timeout)
    return reply.status, reply.json({}), reply.elapsed_s


def _worker_pids(server: LocalServer) -> dict[int, int]:
    found = re.findall(r"sglang-fair router: worker (\d+) is process (\d+)", server.log_tail(100_000))
    return {int(rank): int(pid) for rank, pid in found}


def _states_by_rank(info: dict) -> dict:
    return {state.get("dp_rank", (state.get("fair") or {}).get("dp_rank")): state for state in info["internal_states"]}


@pytest.fixture
def server(dlpm_dp2_server: LocalServer, server_pool) -> LocalServer:
    """The shared ``--dp 2`` server, for this test alone: it stops a worker, kills it, then stops the server."""
    return server_pool.take(dlpm_dp2_server)


@pytest.mark.takes_shared_server
def test_a_silent_worker_then_its_death_never_hold_an_info_call(server: LocalServer) -> None:
    pids = _worker_pids(server)
    assert set(pids) == {0, 1}, pids
    status, info, _ = _get(server, "/server_info")
    assert status == 200 and set(_states_by_rank(info)) == {0, 1}

    # 1. A worker that does not answer: the call ends at the deadline, with what worker 0 said.
    os.kill(pids[1], signal.SIGSTOP)
    try:
        status, info, took = _get(server, "/server_info")
        assert status == 200 and DEADLINE_S <= took < DEADLINE_S + 3, took
        states = info["internal_states"]
        assert len(states) == 2 and _states_by_rank(info)[0]["fair"]["policy"] == "dlpm", states
        assert any(state.get("no_answer") and "did not answer within 3 s" in state["error"] for state in states)
        status, body, took = _get(server, "/fair/settings", headers=ADMIN)
        assert status == 200 and body["unanswered_ranks"] == [1] and body["ranks"][1] is None, body
        assert body["ranks"][0]["policy"] == "dlpm" and took < DEADLINE_S + 3
    finally:
        os.kill(pids[1], signal.SIGCONT)
    status, info, took = _get(server, "/server_info")  # the late answers found no call waiting
    assert status == 200 and set(_states_by_rank(info)) == {0, 1} and took < DEADLINE_S, (took, info)

    # 2. Calls reach worker 1 and wait; then it dies, with no other traffic at all.
    os.kill(pids[1], signal.SIGSTOP)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        info_call = pool.submit(_get, server, "/server_info")
        settings_call = pool.submit(_get, server, "/fair/settings", ADMIN)
        time.sleep(0.5)  # both reached the controller and went to worker 1
        os.kill(pids[1], signal.SIGKILL)
        killed = time.monotonic()
        noticed = None
        while noticed is None and time.monotonic() - killed < 10:
            status, body, _ = _get(server, "/health")
            if status == 503:
                noticed = time.monotonic() - killed
                assert body["dead_workers"] == [1], body
            else:
                time.sleep(0.1)
        assert noticed is not None and noticed < 2.0, noticed
        status, info, took = info_call.result(timeout=30)
        settings_status, settings_body, _ = settings_call.result(timeout=30)
    # Answered for the dead worker by the controller, before the deadline would have.
    assert status == 200 and _states_by_rank(info)[1] == {"dp_rank": 1, "dead_worker": True}, info
    assert settings_status == 200 and settings_body["dead_ranks"] == [1], settings_body
    assert "unanswered_ranks" not in settings_body

    # Every later call answers at once, from the survivor; it serves.
    for path, headers in (("/server_info", None), ("/get_server_info", None), ("/fair/settings", ADMIN)):
        status, body, took = _get(server, path, headers=headers)
        assert status == 200 and took < 2.0, (path, took, body)
    changed = server.post_json("/fair/settings", {"quantum": 999}, headers=ADMIN, timeout=10)
    assert changed["ranks"][0]["quantum"] == 999 and changed["dead_ranks"] == [1], changed
    body = {"input_ids": [5, 6, 7, 8], "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    reply = server.post_json("/generate", body, headers={"X-Client-Id": "after"}, timeout=60)
    assert reply["meta_info"]["dp_rank"] == 0 and reply["meta_info"]["completion_tokens"] == 4
    stopping = time.monotonic()
    code = server.stop(graceful=True)
    assert time.monotonic() - stopping < 30 and code is not None and code != -9, code
