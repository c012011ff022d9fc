"""Sliding-window request limits behind FairServe's throttling."""

from __future__ import annotations

import pytest

from sglang_fair.core.throttle import MIN_RETRY_AFTER_S, RequestLimiter


def test_counts_every_arrival_and_expires_with_the_window():
    lim = RequestLimiter(window_s=10, user_limit=2)
    for t in (0.0, 1.0, 2.0):
        lim.record("u", None, t)
    decision = lim.exceeded("u", None, 2.0)
    assert decision.reason == "user-limit"
    assert decision.retry_after_s == pytest.approx(1.0 + 10 - 2.0)
    assert lim.exceeded("u", None, 11.5) is None  # arrivals at 0 and 1 expired


def test_per_user_override_and_per_app_limit():
    lim = RequestLimiter(window_s=60, user_limit=1, user_limits={"vip": 100}, app_limit=5, app_limits={"qa": 1})
    for t in range(3):
        lim.record("vip", "qa", float(t))
    assert lim.exceeded("vip", "qa", 3.0).reason == "app-limit"
    assert lim.exceeded("vip", "chat", 3.0) is None
    lim.record("u", "chat", 0.0)
    assert lim.exceeded("u", "chat", 0.0) is None


def test_retry_after_has_a_floor_and_forget_drops_state():
    lim = RequestLimiter(window_s=1, user_limit=1)
    lim.record("u", None, 0.0)
    lim.record("u", None, 0.99)
    assert lim.exceeded("u", None, 0.99).retry_after_s == MIN_RETRY_AFTER_S
    lim.forget("u")
    assert lim.exceeded("u", None, 0.99) is None


def test_retry_after_never_exceeds_the_window() -> None:
    # At this clock value (now + 60) - now is 60.000000000007276: a Retry-After of 61 s once rounded up.
    now = 65528.05003363621
    lim = RequestLimiter(window_s=60, user_limit=1)
    lim.record("u", None, now)
    lim.record("u", None, now)
    assert lim.exceeded("u", None, now).retry_after_s == 60.0


@pytest.mark.parametrize("kwargs", [{"window_s": 0}, {"user_limit": 0}, {"app_limits": {"qa": 1.5}}])
def test_bad_limits(kwargs):
    with pytest.raises(ValueError):
        RequestLimiter(**kwargs)


def test_state_of_quiet_clients_is_dropped():
    lim = RequestLimiter(window_s=10, user_limit=1)
    for i in range(100):
        lim.record(f"u{i}", "qa", 0.0)
    lim.record("u1", "qa", 5.0)
    lim.record("u1", "chat", 12.0)  # a window after the first sweep: sweeps again
    assert set(lim._user) == {"u1"}  # u0 and u2.. were quiet for a whole window
    lim.record("u1", "chat", 19.0)
    lim.record("u1", "chat", 22.0)  # sweeps: u1 stays, its qa (last at 5) goes
    assert list(lim._user_app["u1"]) == ["chat"]
