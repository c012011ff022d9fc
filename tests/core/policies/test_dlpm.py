"""DLPM against the DLPM paper (Algorithm 1, Theorem 4.1, work conservation)."""

from __future__ import annotations

import random

import pytest

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.policies.dlpm import DLPMPolicy
from tests.core.engine_loop import EngineLoop, Spec, max_pairwise_gap


def _backlogged_run(seed: int, policy: str = "dlpm", isolation: bool = False):
    rng = random.Random(seed)
    quantum = rng.choice([50.0, 200.0, 1000.0, 4000.0])
    capacity = rng.choice([400, 800, 1500])
    max_in, max_out = rng.randint(40, 300), rng.randint(10, 60)
    clients = [f"c{i}" for i in range(rng.randint(2, 4))]
    # Skewed clients: some send long shared prefixes (the flooding pattern).
    shapes = {c: (rng.randint(40, max_in), rng.uniform(0.0, 0.5)) for c in clients}

    def make(c):
        length, share = shapes[c]
        inp = max(30, int(rng.uniform(0.75, 1.0) * length))
        return Spec(c, inp, rng.randint(10, max_out), int(share * inp))

    # A request holds at least 25 tokens, so no step admits more than this many.
    depth = capacity // 25 + 2
    loop = EngineLoop(FairOptions(policy=policy, quantum=quantum, isolation=isolation), kv_capacity=capacity, seed=seed)
    for _ in range(300):
        loop.keep_backlogged(make, clients, depth)
        loop.step()
    return loop, clients, quantum, capacity, max_in


@pytest.mark.parametrize("isolation", [False, True])
@pytest.mark.parametrize("seed", range(25))
def test_theorem_4_1_backlogged_clients_service_gap(seed, isolation):
    loop, clients, quantum, capacity, max_in = _backlogged_run(seed, isolation=isolation)
    w_e, w_q = 1.0, 2.0
    U = w_e * max_in + w_q * capacity
    gap = max_pairwise_gap(loop.stats, clients, 0, loop.step_no)
    assert gap <= 2 * (U + quantum), (gap, U, quantum)
    assert loop.stats.work_conservation_violations == 0
    if not isolation:
        assert loop.stats.preemptions == loop.stats.starved_admitted == 0


def test_isolation_acts_in_the_randomized_runs():
    """The bound test's isolated runs exercise it: starved clients admitted first, and preemptions."""
    stats = [_backlogged_run(seed, isolation=True)[0].stats for seed in range(25)]
    assert sum(s.preemptions > 0 for s in stats) >= 10 and sum(s.starved_admitted > 0 for s in stats) >= 10


def _flood(policy: str) -> EngineLoop:
    """A heavy client floods long shared-prefix requests beside a light client."""
    specs = {"heavy": Spec("heavy", 200, 10, 190), "light": Spec("light", 50, 10, 0)}
    loop = EngineLoop(FairOptions(policy=policy, quantum=100.0), kv_capacity=600)
    for _ in range(400):
        loop.keep_backlogged(specs.get, ["heavy", "light"], depth=32)  # a step admits <= 30
        loop.step()
    return loop


def test_lpm_is_not_bounded_where_dlpm_is():
    """The same flood under LPM breaks the bound (so the bound check has teeth)."""
    bound = 2 * (1.0 * 200 + 2.0 * 600 + 100.0)
    lpm, dlpm = _flood("lpm"), _flood("dlpm")
    assert max_pairwise_gap(dlpm.stats, ["heavy", "light"], 0, dlpm.step_no) <= bound
    assert max_pairwise_gap(lpm.stats, ["heavy", "light"], 0, lpm.step_no) > bound
    assert dlpm.fair.ledger.service("light") > 2 * lpm.fair.ledger.service("light")


def test_refill_only_when_every_queued_client_is_out_of_deficit():
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=100.0))
    a = fair.enqueue("a1", "A", 80)
    fair.enqueue("a2", "A", 80)
    b = fair.enqueue("b1", "B", 30)
    policy: DLPMPolicy = fair.policy
    walk = fair.walk(fair.order(list(fair.requests.values())))
    assert next(walk) is a  # both start at 0: one refill round, both get Q^u
    assert policy.deficits == {"A": 100.0, "B": 100.0}
    fair.admit(a, 0)  # A: 100 - 80 = 20
    second = next(walk)
    assert second.rid == "a2"
    fair.admit(second, 0)  # A: 20 - 80 = -60, B still positive: no refill
    assert next(walk) is b
    assert policy.deficits == {"A": -60.0, "B": 100.0}
    assert policy.refills == 1


def test_new_client_starts_at_zero_and_never_banks_more_than_one_quantum():
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=100.0))
    for i in range(50):  # A served alone for a long time; refills happen many times
        r = fair.enqueue(f"a{i}", "A", 90)
        for cand in fair.walk(fair.order([r])):
            fair.admit(cand, 0)
        fair.finish(r)
    assert fair.policy.deficits["A"] <= 100.0
    fair.enqueue("b", "B", 10)
    assert fair.policy.deficits["B"] == 0.0


def test_skipped_request_is_admitted_in_the_same_pass_once_others_run_out():
    """Work conservation: B is skipped first (A positive), then admitted after A's deficit runs out."""
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=100.0))
    fair.policy.deficits.update({"A": 50.0, "B": -10.0})
    b = fair.enqueue("b", "B", 10)
    a = fair.enqueue("a", "A", 60)
    b.cached_len, a.cached_len = 5, 0  # LPM puts b first
    admitted = []
    for cand in fair.walk(fair.order([a, b])):
        fair.admit(cand, cand.cached_len)
        admitted.append(cand.rid)
    assert admitted == ["a", "b"]


def test_weights_scale_the_charge():
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=100.0, client_weights={"gold": 2.0}))
    g = fair.enqueue("g", "gold", 50)
    s = fair.enqueue("s", "silver", 50)
    for cand in fair.walk(fair.order([g, s])):
        fair.admit(cand, 0)
    assert fair.policy.deficits["gold"] == pytest.approx(100 - 25)
    assert fair.policy.deficits["silver"] == pytest.approx(100 - 50)


@pytest.mark.parametrize("isolation", [False, True])
def test_a_new_client_beside_a_backlog_with_credit_waits_only_without_isolation(isolation):
    """Algorithm 1 starts a new client at 0, so beside a backlogged client with a positive
    deficit its request is skipped (no refill while that client is positive); with latency
    isolation it starts with one quantum, and an isolation pass, which walks the starved
    client's requests first, offers it at once."""
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=1000.0, isolation=isolation))
    flood = [fair.enqueue(f"f{i}", "flood", 100) for i in range(20)]
    fair.admit(next(iter(fair.walk(fair.order(flood)))), 0)  # the refill gave the flood 1000; 100 spent
    assert fair.policy.counter("flood") == 900.0
    light = fair.enqueue("l0", "light", 10)
    offered = [req.rid for req in fair.walk([light])]
    assert offered == (["l0"] if isolation else [])
    assert fair.policy.counter("light") == (1000.0 if isolation else 0.0)
