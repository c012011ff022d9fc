"""Run-time admin on the real server: /fair/settings needs the admin key, refuses bad input
with 400, and a change (quantum, client weight, FairServe's limits) takes effect on the next
requests."""

from __future__ import annotations

import contextlib

import pytest

from tests.support.servers import ADMIN_KEY
from tests.support.http import call, client_metric, metric, metrics_text, samples, wait_until

pytestmark = pytest.mark.server

ADMIN = ADMIN_KEY  # the shared servers' admin key


@contextlib.contextmanager
def _settings_restored(server):
    """The server, with the quantum and client weights it has now put back when the block ends."""
    status, before = _call(server, "/fair/settings")
    assert status == 200, before
    try:
        yield server
    finally:
        quantum, weights = before["ranks"][0]["quantum"], before["ranks"][0]["client_weights"]
        _, now = _call(server, "/fair/settings")
        added = {client: None for rank in now["ranks"] for client in rank["client_weights"] if client not in weights}
        status, after = _call(server, "/fair/settings", {"quantum": quantum, "client_weights": {**added, **weights}})
        assert status == 200 and all(rank["quantum"] == quantum and rank["client_weights"] == weights
                                     for rank in after["ranks"]), after


def _call(server, path: str, body: dict | None = None, key: str | None = ADMIN, client: str | None = None):
    headers = {}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if client is not None:
        headers["X-Client-Id"] = client
    reply = call(server.url(path), body, headers)
    return reply.status, reply.json()


def _series(server, name: str, client: str) -> float | None:
    return client_metric(metrics_text(server), name, client)  # summed over dp ranks


def _after_request(server, client: str, service_before: float) -> tuple[float, float]:
    """Send one request as ``client``; (counter, service) once /metrics shows it (refreshed each second)."""
    status, _ = _call(server, "/generate", {"input_ids": list(range(1, 60)), "sampling_params": {"max_new_tokens": 8}},
                      key=None, client=client)
    assert status == 200
    text = wait_until(lambda: metrics_text(server),
                      lambda text: (client_metric(text, "client_service_total", client) or 0) > service_before
                      and client_metric(text, "client_running_requests", client) == 0,
                      timeout_s=15, what=f"/metrics showing {client}'s request")
    return client_metric(text, "client_policy_state", client), client_metric(text, "client_service_total", client)


def test_settings_change_at_run_time_with_the_admin_key_only(dlpm_server):
    # The shared --policy dlpm --enable-metrics server; its settings are put back afterwards.
    with _settings_restored(dlpm_server) as server:
        assert _call(server, "/fair/settings", key=None)[0] == 401
        assert _call(server, "/fair/settings", key="wrong")[0] == 401
        status, body = _call(server, "/fair/settings")
        assert status == 200 and body["ranks"][0]["policy"] == "dlpm"

        status, body = _call(server, "/fair/settings", {"quantum": -3})
        assert status == 400 and "quantum" in body["error"]
        status, body = _call(server, "/fair/settings", {"input_weight": 3})
        assert status == 400 and "input_weight" in body["error"]
        status, body = _call(server, "/fair/settings", {"throttle": {"user_limit": 2}})
        assert status == 400 and "fairserve" in body["error"]  # dlpm does not throttle
        status, body = _call(server, "/fair/settings", {"client_weights": {"": 2, "bad id": 3}})
        assert status == 400 and "invalid client id(s) '', 'bad id'" in body["error"]

        status, body = _call(server, "/fair/settings", {"quantum": 100000, "client_weights": {"weighted": 4}})
        assert status == 200
        assert body["ranks"][0]["quantum"] == 100000 and body["ranks"][0]["client_weights"] == {"weighted": 4.0}
        _, info = _call(server, "/server_info")
        assert info["internal_states"][0]["fair"]["client_weights"] == {"weighted": 4.0}

        # weighted's first request: CHECKREFILL gives her the new Q^u, then charges cost / weight 4.
        counter, service = _after_request(server, "weighted", 0.0)
        assert counter == pytest.approx(100000 - service / 4)
        counter2, service2 = _after_request(server, "weighted", service)
        assert counter - counter2 == pytest.approx((service2 - service) / 4)
        assert _series(server, "client_weight", "weighted") == 4.0
        assert metric(metrics_text(server), "sglang_fair_quantum", dp_rank="0") == 100000

        # null removes weighted's weight: back to the default share.
        status, body = _call(server, "/fair/settings", {"client_weights": {"weighted": None}})
        assert status == 200 and body["ranks"][0]["client_weights"] == {}
        counter3, service3 = _after_request(server, "weighted", service2)
        assert counter2 - counter3 == pytest.approx(service3 - service2)


def test_fairserve_throttle_limits_change_at_run_time(fairserve_server):
    # The shared FairServe server (overloaded whatever the KV use, one request per user per window);
    # its limits are put back afterwards. Its clients here are this test's own.
    server, alice, bob = fairserve_server, "admin-alice", "admin-bob"
    generate = {"input_ids": list(range(1, 30)), "sampling_params": {"max_new_tokens": 2}}
    status, before = _call(server, "/fair/settings")
    assert status == 200, before
    found = before["ranks"][0]["throttle"]
    try:
        status, body = _call(server, "/fair/settings", {"throttle": {"overload_kv_usage": 1.0}})  # never overloaded
        assert status == 200 and body["ranks"][0]["throttle"]["overload_kv_usage"] == 1.0
        assert [_call(server, "/generate", generate, key=None, client=alice)[0] for _ in range(3)] == [200] * 3
        # Overloaded whatever the KV use again, and one request per window each: alice's next is refused.
        status, body = _call(server, "/fair/settings", {"throttle": {"overload_kv_usage": 0.0, "user_limit": 1}})
        assert status == 200 and body["ranks"][0]["throttle"]["user_limit"] == 1
        assert _call(server, "/generate", generate, key=None, client=alice)[0] == 429
        assert _call(server, "/generate", generate, key=None, client=bob)[0] == 200  # his first in the window
        status, body = _call(server, "/fair/settings", {"throttle": {"user_limits": {alice: 100}}})
        assert status == 200 and body["ranks"][0]["throttle"]["user_limits"][alice] == 100
        assert _call(server, "/generate", generate, key=None, client=alice)[0] == 200
    finally:  # a per-client limit cannot be removed: alice's is set back to the server's own
        restore = {key: found[key] for key in ("overload_kv_usage", "user_limit")}
        status, body = _call(server, "/fair/settings", {"throttle": {**restore, "user_limits": {alice: found["user_limit"]}}})
        assert status == 200 and body["ranks"][0]["throttle"]["overload_kv_usage"] == found["overload_kv_usage"]


def test_without_an_admin_key_the_settings_are_closed(lpm_server):
    # The shared server under SGLang's own launcher has no admin key; our routes are there all the same.
    for body in (None, {"quantum": 5}):
        status, reply = _call(lpm_server, "/fair/settings", body, key=None)
        assert status == 403 and "start it with --admin-api-key KEY" in reply["error"]


def test_under_dp_every_rank_and_the_router_take_the_change(dlpm_dp2_server):
    # The shared --policy dlpm --dp 2 --enable-metrics server; its settings are put back afterwards.
    with _settings_restored(dlpm_dp2_server) as server:
        status, body = _call(server, "/fair/settings", {"quantum": 3000, "client_weights": {"weighted-dp": 2}})
        assert status == 200 and len(body["ranks"]) == 2
        assert all(rank["quantum"] == 3000 and rank["client_weights"] == {"weighted-dp": 2.0} for rank in body["ranks"])
        _, info = _call(server, "/server_info")
        assert [state["fair"]["quantum"] for state in info["internal_states"]] == [3000, 3000]
        status, _ = _call(server, "/generate", {"input_ids": list(range(1, 60)), "sampling_params": {"max_new_tokens": 4}},
                          key=None, client="weighted-dp")
        assert status == 200
        # The d2lpm_global router's cluster-wide DLPM refilled the client by the new quantum and
        # charged its service at weight 2, as the worker that served her measured it.
        def service_and_deficit():
            text = metrics_text(server)
            return (client_metric(text, "client_service_total", "weighted-dp"),
                    samples(text, "sglang_fair_router_client_global_deficit", client="weighted-dp"))

        wait_until(service_and_deficit,
                   lambda seen: bool(seen[0] and seen[1]) and seen[1][0] == pytest.approx(3000 - seen[0] / 2),
                   timeout_s=20, interval_s=0.5, what="router deficit == 3000 - service / 2")
