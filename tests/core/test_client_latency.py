"""Per-client latency histograms kept by the FairScheduler."""

from __future__ import annotations

import pytest

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.client_latency import LATENCY_BUCKETS_S, LatencyHistogram


def test_an_observation_lands_in_the_first_bucket_that_holds_it() -> None:
    hist = LatencyHistogram()
    for seconds in (0.0, 0.01, 0.011, 300.0, 301.0, -1.0):
        hist.observe(seconds)
    bucket = {bound: n for bound, n in zip([*LATENCY_BUCKETS_S, float("inf")], hist.counts)}
    # Upper bounds are inclusive, as Prometheus' "le"; negative clock skew counts as 0.
    assert bucket[0.01] == 3 and bucket[0.025] == 1 and bucket[300.0] == 1 and bucket[float("inf")] == 1
    assert hist.count == 6 and hist.total_s == pytest.approx(0.021 + 601.0)


def _fair(now: list[float]) -> FairScheduler:
    return FairScheduler(FairOptions(policy="dlpm", quantum=1000, idle_timeout_s=5), clock=lambda: now[0])


def test_queue_first_token_and_end_to_end_are_measured_from_arrival_once() -> None:
    now = [10.0]
    fair = _fair(now)
    req = fair.enqueue("r", "alice", 8)
    now[0] = 11.0
    fair.admit(req, 0)
    now[0] = 11.5
    fair.produced(req, 1)
    now[0] = 12.0
    fair.produced(req, 5)  # later tokens: not a first token
    fair.requeue(req)  # retracted and admitted again: waiting again is not a new queue time
    now[0] = 13.0
    fair.admit(req, 8)
    now[0] = 14.0
    fair.finish(req)
    latency = fair.latency.get("alice")
    assert (latency.queue_time.count, latency.queue_time.total_s) == (1, 1.0)
    assert (latency.first_token.count, latency.first_token.total_s) == (1, 1.5)
    assert (latency.end_to_end.count, latency.end_to_end.total_s) == (1, 4.0)


def test_a_request_that_never_ran_has_no_end_to_end_latency_and_idle_clients_are_forgotten() -> None:
    now = [0.0]
    fair = _fair(now)
    req = fair.enqueue("r", "bob", 8)
    now[0] = 3.0
    fair.finish(req)  # aborted while queued
    assert fair.latency.get("bob") is None
    done = fair.enqueue("s", "bob", 8)
    fair.admit(done, 0)
    fair.finish(done)
    assert fair.latency.get("bob").end_to_end.count == 1
    now[0] = 100.0
    assert fair.collect_idle() == ["bob"]
    assert fair.latency.get("bob") is None
