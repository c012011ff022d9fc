"""The shared test helpers for /metrics reads and polling (tests/support/http.py)."""

from __future__ import annotations

import pytest

from tests.support.clock import FakeClock
from tests.support.http import client_metric, metric, samples, wait_until

TEXT = """\
# HELP sglang_fair_client_output_tokens_total x
sglang_fair_client_output_tokens_total{client="alice",dp_rank="0"} 3.0
sglang_fair_client_output_tokens_total{client="alice",dp_rank="1"} 4.0
sglang_fair_client_output_tokens_total{client="alicex",dp_rank="0"} 100.0
sglang_fair_quantum{dp_rank="0"} 100000.0
sglang_fair_router_held_requests 2.0
"""


def test_a_series_is_summed_over_its_matching_labels_only():
    assert client_metric(TEXT, "client_output_tokens_total", "alice") == 7.0
    assert samples(TEXT, "sglang_fair_client_output_tokens_total", client="alice", dp_rank="1") == [4.0]
    assert metric(TEXT, "sglang_fair_quantum", dp_rank="0") == 100000
    assert metric(TEXT, "sglang_fair_router_held_requests") == 2.0
    assert client_metric(TEXT, "client_output_tokens_total", "bob") is None
    assert metric(TEXT, "sglang_fair_quantum", dp_rank="1") is None


def test_wait_until_returns_the_first_good_reading_and_fails_with_the_last():
    readings = iter(range(10))
    assert wait_until(lambda: next(readings), lambda v: v >= 3, timeout_s=5, interval_s=0) == 3
    with pytest.raises(AssertionError, match="last reading: 0"):
        wait_until(lambda: 0, lambda v: v > 0, timeout_s=0, interval_s=0, what="a positive reading")


def test_the_fake_clock_moves_only_when_told():
    clock = FakeClock()
    assert clock() == 0.0
    assert clock.advance(1.5) == 1.5 and clock() == 1.5
