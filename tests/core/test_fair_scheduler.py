"""FairScheduler bookkeeping: charging rules and bounded per-client state."""

from __future__ import annotations

import pytest

from sglang_fair.core import FairOptions, FairScheduler, RequestState
from tests.support.clock import FakeClock



def test_output_charged_once_per_token_whatever_the_reporting():
    fair = FairScheduler(FairOptions(policy="vtc"))
    req = fair.enqueue("r", "a", 10)
    fair.admit(req, 0)
    fair.produced(req, 1)  # first token from prefill
    fair.produced(req, 4)  # a speculative step accepting 3 tokens
    fair.produced(req, 4)  # the same count reported again
    assert fair.ledger.get("a").output_tokens == 4
    assert fair.ledger.get("a").service == pytest.approx(10 + 2 * 4)


def test_aborted_request_stops_being_charged():
    fair = FairScheduler(FairOptions(policy="dlpm"))
    req = fair.enqueue("r", "a", 10)
    fair.admit(req, 0)
    fair.finish(req)
    fair.finish(req)  # idempotent
    fair.produced(req, 5)
    assert fair.ledger.get("a").output_tokens == 0
    assert fair.activity["a"].running == 0


def test_abort_while_queued_leaves_the_queue():
    fair = FairScheduler(FairOptions(policy="dlpm"))
    req = fair.enqueue("r", "a", 10)
    fair.finish(req)
    assert fair.activity["a"].queued == 0 and req.state is RequestState.DONE
    assert "r" not in fair.requests


def test_duplicate_request_id_is_refused():
    fair = FairScheduler(FairOptions(policy="fcfs"))
    fair.enqueue("r", "a", 1)
    with pytest.raises(ValueError, match="already tracked"):
        fair.enqueue("r", "b", 1)


def test_idle_clients_are_forgotten_after_the_timeout_and_busy_ones_kept():
    clock = FakeClock()
    fair = FairScheduler(FairOptions(policy="vtc", idle_timeout_s=60), clock=clock)
    for i in range(1000):  # many distinct, short-lived clients
        req = fair.enqueue(f"r{i}", f"client{i}", 5)
        fair.admit(req, 0)
        fair.finish(req)
    busy = fair.enqueue("busy", "steady", 5)
    clock.now = 61.0
    gone = fair.collect_idle()
    assert len(gone) == 1000
    assert set(fair.activity) == {"steady"}
    assert set(fair.policy.counters) == {"steady"}
    assert fair.ledger.get("client0") is None
    assert busy.state is RequestState.QUEUED


def test_options_refuse_bad_values_naming_the_option():
    from sglang_fair.core import OptionError

    for kwargs, option in [
        ({"quantum": 0}, "--fair-quantum"),
        ({"quantum": float("nan")}, "--fair-quantum"),
        ({"output_weight": -1}, "--fair-output-weight"),
        ({"client_weights": {"a": -2}}, "--fair-client-weights"),
    ]:
        with pytest.raises(OptionError, match=option):
            FairOptions(**kwargs)
    # Options are a leaf of the core: a policy's name is checked where the policy is built.
    with pytest.raises(OptionError, match="--fair-policy/--policy: unknown policy 'nope'; choose one of"):
        FairScheduler(FairOptions(policy="nope"))


def test_client_ids_are_bounded():
    from sglang_fair.core import normalize_client_id

    assert normalize_client_id(None) == "default"
    assert normalize_client_id("  ") == "default"
    assert normalize_client_id("tenant-7@acme.io") == "tenant-7@acme.io"
    long_id = normalize_client_id("x" * 10_000)
    assert long_id.startswith("~") and len(long_id) == 17
    assert normalize_client_id("x" * 10_000) == long_id
    assert normalize_client_id("a b") != normalize_client_id("a_b")
