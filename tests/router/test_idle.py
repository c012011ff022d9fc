"""Routers forget clients idle for idle_timeout_s (bounded per-client state)."""

import pytest

from sglang_fair.router import make_router
from sglang_fair.router.idle import IdleClients
from tests.support.clock import FakeClock

PER_CLIENT_STATE = {"d2lpm": "deficits", "per_client_round_robin": "_next"}



def router(name, timeout=600.0, workers=4):
    r = make_router(name, workers, idle_timeout_s=timeout)
    r.clock = FakeClock()
    return r


@pytest.mark.parametrize("name", sorted(PER_CLIENT_STATE))
def test_ten_thousand_short_lived_clients_do_not_stay_in_memory(name):
    r = router(name, timeout=60.0)
    state = getattr(r, PER_CLIENT_STATE[name])
    for k in range(10_000):
        r.clock.now = k * 0.1  # one new client every 0.1 s, each with one short request
        w = r.route(f"r{k}", f"client{k}", [k % 50, 1, 2], 8)
        r.on_finish(f"r{k}", w, 8)
    # Only clients idle for less than 60 s (600 of them) are still known.
    assert len(state) <= 601 and len(r.clients) <= 601
    r.clock.now += 61
    r.route("last", "newcomer", [1, 2, 3], 8)
    assert set(state) == {"newcomer"} and len(r.clients) == 1


@pytest.mark.parametrize("name", sorted(PER_CLIENT_STATE))
def test_client_with_requests_in_flight_is_never_forgotten(name):
    r = router(name, timeout=10.0)
    state = getattr(r, PER_CLIENT_STATE[name])
    r.route("long", "busy", [1, 2, 3], 8)  # never finishes during the test
    for k in range(100):
        r.clock.now = k * 1.0
        w = r.route(f"r{k}", f"c{k}", [4, 5], 8)
        r.on_finish(f"r{k}", w, 1)
    assert "busy" in state and "c0" not in state and "c99" in state


def test_returning_d2lpm_client_starts_with_fresh_counters():
    r = router("d2lpm", timeout=10.0, workers=2)
    w = r.route("a", "x", list(range(30_000)), 8)  # overdraws its counter on w
    r.on_finish("a", w, 8)
    assert r.deficits["x"][w] < 0
    r.clock.now = 11.0
    r.route("b", "y", [1], 1)  # any routing sweeps
    assert "x" not in r.deficits
    r.route("c", "x", [1], 1)
    assert r.deficits["x"] == [r.quantum - (1 if k == r.inflight["c"].worker else 0) for k in range(2)]


def test_worker_down_releases_its_clients():
    r = router("per_client_round_robin", timeout=5.0, workers=2)
    assert {r.route("a", "x", [1], 4), r.route("b", "x", [1], 4)} == {0, 1}
    assert r.on_worker_down(0) and "x" in r.clients.inflight
    assert r.on_worker_down(1) and "x" in r.clients.idle_since  # nothing of x is in flight any more


def test_idle_order_and_bad_timeouts():
    idle = IdleClients(5.0)
    idle.dispatched("a")
    idle.dispatched("b")
    idle.finished("b", 1.0)
    idle.finished("a", 2.0)
    idle.dispatched("b")  # busy again: not idle any more
    idle.finished("b", 3.0)
    assert idle.sweep(7.5) == ["a"] and idle.sweep(8.5) == ["b"] and len(idle) == 0
    for bad in (0, -1, float("nan"), True, "60"):
        with pytest.raises(ValueError, match="idle_timeout_s"):
            make_router("d2lpm", 2, idle_timeout_s=bad)
