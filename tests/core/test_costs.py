"""The charge a policy is handed: the cost as priced, the client weight, the tokens by kind."""

from __future__ import annotations

import pytest

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.costs import Charge


def test_the_weighted_amount_divides_the_cost_by_the_weight():
    charge = Charge(12.0, 4.0, output_tokens=3)
    assert charge.weighted == 3.0 and charge.input_tokens == 0


@pytest.mark.parametrize("policy", ["vtc", "dlpm"])
def test_counters_take_the_weighted_amount_and_the_ledger_the_cost(policy):
    fair = FairScheduler(FairOptions(policy=policy, client_weights={"alice": 2.0}))
    req = fair.enqueue("r", "alice", 100)
    before = fair.policy.counter("alice")
    for r in fair.walk(fair.order([req])):
        fair.admit(r, 0)
    fair.produced(req, 10)
    cost = fair.ledger.service("alice")
    # VTC's counter grows by the service; DLPM's deficit shrinks by it, after the refills its walk made.
    moved = fair.policy.counter("alice") - before
    if policy == "dlpm":
        moved = fair.policy.refills * fair.policy.quantum - moved
    assert cost > 0 and moved == pytest.approx(cost / 2.0)
