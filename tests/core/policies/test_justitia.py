"""Justitia: KV token-time cost, virtual finish order, and the delay bound (Theorem 1).

The delay bound is checked on a small deterministic step model of a KV-bound
server (tests/core/step_model.py), driven through FairScheduler like a real
engine, against an exact fluid GPS reference with the same capacity M.
"""

from __future__ import annotations

import random

import pytest

from sglang_fair.core import FairOptions, FairScheduler, OptionError
from sglang_fair.core.costs import COSTS, KVTokenTimeCost, make_cost
from tests.core.paper_scenarios import ShortestJobFirst, application_mix, delay_excess, starvation_mix
from tests.core.step_model import Oracle, kv_cost


# -- cost -------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(20))
def test_kv_token_time_charged_incrementally_sums_to_formula(seed):
    rng = random.Random(seed)
    cost = make_cost("kv-token-time")
    p, d = rng.randint(0, 5000), rng.randint(0, 3000)
    total, done = cost.admission(p, rng.randint(0, p)), 0
    while done < d:
        new = min(d - done, rng.randint(1, 64))
        total += cost.output(new, p + done)
        done += new
    assert total == kv_cost(p, d)


@pytest.mark.parametrize("policy", ["fcfs", "lpm", "vtc", "dlpm", "fairserve", "justitia"])
def test_kv_token_time_selectable_for_every_policy(policy):
    fair = FairScheduler(FairOptions(policy=policy, cost="kv-token-time"))
    req = fair.enqueue("r", "alice", 100)
    for r in fair.walk(fair.order([req])):
        fair.admit(r, 0)
    fair.produced(req, 10)
    assert fair.cost.name == "kv-token-time"
    assert fair.ledger.service("alice") == kv_cost(100, 10)
    assert "kv-token-time" in COSTS and KVTokenTimeCost().max_input_weight == 0


def test_justitia_defaults_to_kv_token_time():
    assert FairScheduler(FairOptions(policy="justitia")).cost.name == "kv-token-time"


# -- ordering ---------------------------------------------------------------------
def test_order_by_virtual_finish_time_and_jobs_stay_together():
    fair = FairScheduler(FairOptions(policy="justitia"))
    fair.policy.predictor = Oracle({0: 10_000.0, 1: 100.0})
    big = [fair.enqueue(f"b{i}", "alice", 10, interaction="big", prompt=[0]) for i in range(3)]
    small = [fair.enqueue(f"s{i}", "bob", 10, interaction="small", prompt=[1]) for i in range(2)]
    order = [r.rid for r in fair.walk(fair.order(big + small))]
    assert order == ["s0", "s1", "b0", "b1", "b2"]
    # A later call of the big job keeps its finish time, behind the small job.
    late = fair.enqueue("s2", "bob", 10, interaction="small", prompt=[1])
    assert fair.policy.finish_time(late) == fair.policy.finish_time(small[0]) == 100.0


def test_virtual_time_advances_with_service_over_active_jobs():
    fair = FairScheduler(FairOptions(policy="justitia"))
    fair.policy.predictor = Oracle({0: 300.0, 1: 1000.0})
    a = fair.enqueue("a", "alice", 50, prompt=[0])
    fair.enqueue("b", "bob", 50, prompt=[1])
    fair.admit(a, 0)
    fair.produced(a, 4)  # 51+52+53+54 = 210 delivered, 2 jobs active: V = 105
    assert fair.policy.vclock.now == pytest.approx(105.0)
    c = fair.enqueue("c", "carol", 10, prompt=[0])  # F = V + 300
    assert fair.policy.finish_time(c) == pytest.approx(405.0)


def test_finished_jobs_teach_the_per_type_mean():
    fair = FairScheduler(FairOptions(policy="justitia"))
    for i, out in enumerate([10, 30]):
        req = fair.enqueue(f"r{i}", "alice", 100, app="sc", prompt=[1, 2, 3])
        fair.admit(req, 0)
        fair.produced(req, out)
        fair.finish(req)
    mean = (kv_cost(100, 10) + kv_cost(100, 30)) / 2
    assert fair.policy.predictor.predict("sc", [9]) == pytest.approx(mean)
    assert fair.policy.completed == 2


def test_history_file_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"app": "sc", "prompt": [1], "cost": 5}\n{"app": "sc"}\n')
    with pytest.raises(OptionError, match="h.jsonl:2"):
        FairScheduler(FairOptions(policy="justitia", policy_config={"justitia": {"history": str(bad)}}))
    with pytest.raises(OptionError, match="unknown keys"):
        FairScheduler(FairOptions(policy="justitia", policy_config={"justitia": {"histroy": "x"}}))


# -- delay bound (Theorem 1) ----------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_delay_bound_on_randomized_application_mixes(seed):
    rng = random.Random(seed)
    capacity = rng.choice([128, 256, 512])
    # The paper's 72/26/2 % small/medium/large mix, with bursts and gaps.
    jobs = application_mix(seed, rng.randint(20, 80), (0, 0, 0, 1, 2, 5))
    excess, bound = delay_excess(jobs, capacity)
    assert excess <= bound, (excess, bound)


def test_starvation_microbenchmark_bounded_for_justitia_not_for_shortest_first():
    capacity = 200
    excess, bound = delay_excess(starvation_mix(600), capacity)
    assert excess <= bound
    # The same check catches a scheduler that starves the elephant (SRJF).
    excess_sjf, bound_sjf = delay_excess(starvation_mix(600), capacity, ShortestJobFirst)
    assert excess_sjf > bound_sjf


def test_a_weighted_client_s_work_is_delivered_unweighted():
    """The charge carries the cost before the weight: Justitia's clock and job cost count work
    delivered, so a weight-3 client's job costs what it computed, not three times less or more."""
    fair = FairScheduler(FairOptions(policy="justitia", client_weights={"alice": 3.0}))
    req = fair.enqueue("r", "alice", 100, interaction="job", prompt=[0])
    for r in fair.walk(fair.order([req])):
        fair.admit(r, 0)
    fair.produced(req, 10)
    job = fair.policy.jobs[fair.policy.job_key(req)]
    assert job.cost == pytest.approx(kv_cost(100, 10))
