"""VTC against the VTC paper (Algorithm 2, Theorem 4.4, counter lift)."""

from __future__ import annotations

import random

import pytest

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.policies.vtc import VTCPolicy
from tests.core.engine_loop import EngineLoop, Spec, max_pairwise_gap


def _backlogged_run(seed: int, isolation: bool):
    rng = random.Random(seed)
    capacity = rng.choice([300, 800, 1500])
    max_in, max_out = rng.randint(20, 250), rng.randint(10, 50)
    clients = [f"c{i}" for i in range(rng.randint(2, 4))]

    def make(c):
        return Spec(c, rng.randint(15, max_in), rng.randint(10, max_out), 0)

    loop = EngineLoop(FairOptions(policy="vtc", isolation=isolation), kv_capacity=capacity, seed=seed)
    for _ in range(300):
        loop.keep_backlogged(make, clients, depth=capacity // 25 + 2)  # requests hold >= 25 tokens
        loop.step()
    return loop, clients, 2 * max(1.0 * max_in, 2.0 * capacity)


@pytest.mark.parametrize("isolation", [False, True])
@pytest.mark.parametrize("seed", range(25))
def test_theorem_4_4_backlogged_clients_service_gap(seed, isolation):
    loop, clients, bound = _backlogged_run(seed, isolation)
    assert max_pairwise_gap(loop.stats, clients, 0, loop.step_no) <= bound
    assert loop.stats.work_conservation_violations == 0
    if not isolation:
        assert loop.stats.preemptions == loop.stats.starved_admitted == 0


def test_isolation_acts_in_the_randomized_runs():
    """The bound test's isolated runs exercise it: starved clients admitted first, and preemptions."""
    stats = [_backlogged_run(seed, isolation=True)[0].stats for seed in range(25)]
    assert sum(s.preemptions > 0 for s in stats) >= 5 and sum(s.starved_admitted > 0 for s in stats) >= 5


def test_counter_lift_to_smallest_queued_counter():
    fair = FairScheduler(FairOptions(policy="vtc"))
    policy: VTCPolicy = fair.policy
    a = fair.enqueue("a1", "A", 10)
    fair.enqueue("a2", "A", 10)
    fair.admit(a, 0)  # A's counter: 10
    fair.produced(a, 5)  # +10
    assert policy.counters["A"] == 20.0
    fair.enqueue("b1", "B", 10)  # B new, A queued: lifted to 20
    assert policy.counters["B"] == 20.0


def test_counter_lift_when_system_was_idle():
    """Algorithm 2 lines 8-10: queue empty, the newcomer gets the last leaver's counter."""
    fair = FairScheduler(FairOptions(policy="vtc"))
    a = fair.enqueue("a", "A", 100)
    fair.admit(a, 0)  # A leaves the queue with counter 100
    fair.finish(a)
    fair.enqueue("b", "B", 1)
    assert fair.policy.counters["B"] == 100.0


class _LeastCounterFirst(VTCPolicy):
    """LCF: VTC without the counter lift (the VTC paper's counterexample)."""

    def on_enqueue(self, client, first_in_queue):
        self.counters.setdefault(client, 0.0)


def _late_joiner_gap(policy_cls) -> float:
    loop = EngineLoop(FairOptions(policy="vtc"), kv_capacity=400)
    loop.fair.policy = policy_cls(loop.fair.options, loop.fair.activity)
    spec = lambda c: Spec(c, 40, 10, 0)  # noqa: E731
    for step in range(600):
        clients = ["A"] if step < 300 else ["A", "B"]  # B arrives at step 300
        loop.keep_backlogged(spec, clients, depth=10)  # room for 8 at most
        loop.step()
    return max_pairwise_gap(loop.stats, ["A", "B"], 301, loop.step_no)


def test_no_carry_over_of_unused_credit():
    bound = 2 * max(1.0 * 40, 2.0 * 400)
    assert _late_joiner_gap(VTCPolicy) <= bound
    # Without the lift, B's idle period becomes credit and A starves: the check can fail.
    assert _late_joiner_gap(_LeastCounterFirst) > bound


def test_walk_takes_smallest_counter_first_and_earliest_request_within_client():
    fair = FairScheduler(FairOptions(policy="vtc"))
    a1, a2 = fair.enqueue("a1", "A", 30), fair.enqueue("a2", "A", 30)
    b1 = fair.enqueue("b1", "B", 50)
    order = []
    for cand in fair.walk(fair.order([a1, a2, b1])):
        fair.admit(cand, 0)
        order.append(cand.rid)
    # A(0) -> a1 (A=30); B(0) -> b1 (B=50); A(30) -> a2.
    assert order == ["a1", "b1", "a2"]
