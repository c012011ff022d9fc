"""FairServe: weighted service (Eq. 2-3), counter lift, interaction priority, OIT throttling."""

from __future__ import annotations

import random

import pytest

from sglang_fair.core import FairOptions, FairScheduler, OptionError
from sglang_fair.core.policies.fairserve import FairServePolicy
from tests.core.paper_scenarios import FAIRSERVE_CONFIG, RequestRateLimit, abuse_mix
from tests.core.step_model import StepModel
from tests.support.clock import FakeClock

PROFILES = {
    "qa": {"stages": [{"input": 1000, "system": 200, "output": 32}], "limit": 3},
    "agent": {
        "stages": [
            {"input": 800, "system": 600, "output": 120},
            {"input": 1500, "system": 300, "output": 200},
        ]
    },
}



def make(config: dict | None = None, weights: dict | None = None, clock: FakeClock | None = None) -> FairScheduler:
    body = {"apps": PROFILES, **(config or {})}
    opts = FairOptions(policy="fairserve", policy_config={"fairserve": body}, client_weights=weights or {})
    return FairScheduler(opts, clock=clock or FakeClock())


def expected_service(alpha, beta, gamma, prof, inp, system, out, weight=1.0):
    w = alpha * prof["input"] + beta * prof["system"] + gamma * prof["output"]
    return (alpha * (inp - system) + beta * system + gamma * out) / w / weight


@pytest.mark.parametrize("seed", range(10))
def test_weighted_service_matches_eq3_on_constructed_traces(seed):
    rng = random.Random(seed)
    alpha, beta, gamma = rng.choice([(1, 2, 1), (1, 1, 1), (0.5, 3, 2)])
    weights = {"bob": 2.0}
    fair = make({"alpha": alpha, "beta": beta, "gamma": gamma, "learn_profiles": False}, weights)
    default = {"input": 512, "system": 0, "output": 128}
    calls = []
    for i in range(20):
        client = rng.choice(["alice", "bob", "carol"])
        app, stage = rng.choice([("qa", 0), ("agent", 0), ("agent", 1), ("agent", 5), (None, None)])
        inp = rng.randint(1, 3000)
        system = rng.randint(0, inp)
        out = rng.randint(1, 300)
        prof = default if app is None else PROFILES[app]["stages"][min(stage, len(PROFILES[app]["stages"]) - 1)]
        calls.append((f"r{i}", client, app, stage, inp, system, out, prof))
    reqs = [
        fair.enqueue(rid, c, inp, app=app, interaction=f"{c}-i", stage=stage, system_len=system)
        for rid, c, app, stage, inp, system, out, _ in calls
    ]
    for req in reqs:  # all queued first, so no counter lift interferes
        fair.admit(req, cached_len=0)
    for req, call in zip(reqs, calls):
        out = call[6]
        done = 0
        while done < out:  # output arrives in random chunks
            done = min(out, done + rng.randint(1, 40))
            fair.produced(req, done)
        fair.finish(req)
    want: dict[str, float] = {}
    for _, c, _, _, inp, system, out, prof in calls:
        want[c] = want.get(c, 0.0) + expected_service(alpha, beta, gamma, prof, inp, system, out, weights.get(c, 1.0))
    for client, value in want.items():
        assert fair.policy.counter(client) == pytest.approx(value, rel=1e-9)


def test_typical_call_costs_one_unit_whatever_the_app():
    fair = make()
    a = fair.enqueue("a", "alice", 1200, app="qa", system_len=200)
    b = fair.enqueue("b", "bob", 1400, app="agent", stage=0, system_len=600)
    for req, out in ((a, 32), (b, 120)):
        fair.admit(req, 0)
        fair.produced(req, out)
    assert fair.policy.counter("alice") == pytest.approx(1.0)
    assert fair.policy.counter("bob") == pytest.approx(1.0)


def test_unconfigured_app_learns_its_profile():
    fair = make()
    policy: FairServePolicy = fair.policy
    assert policy.profiles.expected("summarize", 0) == policy.profiles.default
    for i in range(4):
        req = fair.enqueue(f"s{i}", "alice", 10_000 + 1000 * i, app="summarize")
        fair.admit(req, 0)
        fair.produced(req, 50)
        fair.finish(req)
    learned = policy.profiles.expected("summarize", 0)
    assert learned.input == pytest.approx(11_500)
    assert learned.output == pytest.approx(50)


def test_counter_lift_as_vtc():
    fair = make()
    a = fair.enqueue("a1", "alice", 1200, app="qa", system_len=200)
    fair.enqueue("a2", "alice", 1200, app="qa", system_len=200)
    fair.admit(a, 0)
    fair.produced(a, 32)
    lifted_to = fair.policy.counter("alice")
    fair.enqueue("b1", "bob", 10, app="qa")
    assert fair.policy.counter("bob") == pytest.approx(lifted_to)


def test_calls_continuing_an_interaction_go_first():
    fair = make()
    fresh = fair.enqueue("a0", "alice", 100, app="qa")  # waits at counter 0
    # bob has received far more service than alice ...
    warm = fair.enqueue("w", "bob", 1200, app="qa", system_len=200)
    fair.admit(warm, 0)
    fair.produced(warm, 32 * 10)
    fair.finish(warm)
    first = fair.enqueue("b0", "bob", 800, app="agent", interaction="t1", stage=0)
    fair.admit(first, 0)
    fair.finish(first)
    cont = fair.enqueue("b1", "bob", 1500, app="agent", interaction="t1", stage=1)
    assert fair.policy.counter("bob") > fair.policy.counter("alice")
    # ... yet his call that continues interaction t1 is the first candidate.
    assert [r.rid for r in fair.walk(fair.order([fresh, cont]))] == ["b1", "a0"]


def test_vtc_order_without_interactions():
    fair = make()
    heavy = fair.enqueue("h", "bob", 1200, app="qa", system_len=200)
    fair.admit(heavy, 0)
    a = fair.enqueue("a", "alice", 10, app="qa")  # lifted to bob's counter at that time
    fair.produced(heavy, 500)  # bob's counter keeps growing
    b = fair.enqueue("b", "bob", 10, app="qa")
    assert fair.policy.counter("alice") < fair.policy.counter("bob")
    assert [r.rid for r in fair.walk(fair.order([b, a]))] == ["a", "b"]  # least counter first


@pytest.mark.parametrize("seed", range(5))
def test_throttling_never_fires_when_not_overloaded(seed):
    rng = random.Random(seed)
    clock = FakeClock()
    fair = make({"user_limit": 1, "app_limit": 1, "overload_kv_usage": 0.8}, clock=clock)
    for i in range(500):
        clock.now += rng.random() * 0.05  # far above any limit
        client = rng.choice(["abuser", "alice"])
        app = rng.choice(["qa", "agent", None])
        interaction = rng.choice([None, f"{client}-{i}"])
        assert fair.check_arrival(client, rng.random() * 0.7999, app=app, interaction=interaction) is None
        fair.enqueue(f"r{i}", client, 10, app=app, interaction=interaction)
    assert fair.policy.throttled == 0


@pytest.mark.parametrize("seed", range(5))
def test_throttling_never_fires_inside_an_interaction(seed):
    rng = random.Random(seed)
    clock = FakeClock()
    fair = make({"user_limit": 2, "max_interaction_calls": 1000}, clock=clock)
    started: set[tuple[str, str]] = set()
    fired_on_new = 0
    live = []
    for i in range(400):
        clock.now += rng.random() * 0.5
        client = rng.choice(["abuser", "alice", "bob"])
        mine = [k for k in started if k[0] == client]
        if mine and rng.random() < 0.6:
            interaction = rng.choice(mine)[1]
        else:
            interaction = f"{client}-t{i}"
        decision = fair.check_arrival(client, 1.0, app="agent", interaction=interaction)
        if (client, interaction) in started:
            assert decision is None, "a call inside a started interaction was throttled"
        elif decision is not None:
            fired_on_new += 1
            continue
        started.add((client, interaction))
        live.append(fair.enqueue(f"r{i}", client, 10, app="agent", interaction=interaction, stage=0))
        if len(live) > 5:  # keep some calls live, finish others (interactions stay started)
            fair.finish(live.pop(rng.randrange(len(live))))
    assert fired_on_new > 0  # the limits do bite on new interactions
    assert fair.policy.throttled == fired_on_new


def test_user_and_app_limits_with_retry_after():
    clock = FakeClock()
    fair = make({"user_limit": 5, "window_s": 10}, clock=clock)
    decisions = []
    for i in range(4):  # qa's per-user limit is 3
        clock.now = float(i)
        decisions.append(fair.check_arrival("alice", 0.95, app="qa"))
    assert decisions[:3] == [None, None, None]
    assert decisions[3].reason == "app-limit"
    # Arrivals at 0,1,2,3 in a 10 s window: the call at t=1 must expire first.
    assert decisions[3].retry_after_s == pytest.approx(1 + 10 - 3)
    clock.now = 4.0
    assert fair.check_arrival("alice", 0.95, app="agent") is None  # 5 in window
    clock.now = 5.0
    user = fair.check_arrival("alice", 0.95, app="agent")
    assert user.reason == "user-limit" and "alice" in user.message
    assert fair.check_arrival("bob", 0.95, app="qa") is None  # limits are per user
    clock.now = 100.0
    assert fair.check_arrival("alice", 0.95, app="qa") is None  # window passed


def test_interaction_ids_do_not_shield_other_clients_or_exhausted_interactions():
    clock = FakeClock()
    fair = make({"user_limit": 1, "max_interaction_calls": 2}, clock=clock)
    assert fair.check_arrival("alice", 1.0, interaction="t") is None
    fair.enqueue("a0", "alice", 10, interaction="t")
    # bob over his limit cannot hide in alice's interaction id
    assert fair.check_arrival("bob", 1.0) is None
    fair.enqueue("b0", "bob", 10)
    assert fair.check_arrival("bob", 1.0, interaction="t") is not None
    assert fair.check_arrival("alice", 1.0, interaction="t") is None
    fair.enqueue("a1", "alice", 10, interaction="t")
    # two calls used: the interaction no longer shields a third
    assert fair.check_arrival("alice", 1.0, interaction="t") is not None


def test_interaction_expires_after_idle_time():
    clock = FakeClock()
    fair = make({"user_limit": 1, "interaction_idle_s": 5}, clock=clock)
    assert fair.check_arrival("alice", 1.0, interaction="t") is None
    req = fair.enqueue("a0", "alice", 10, interaction="t")
    fair.finish(req)
    clock.now = 3.0
    assert fair.check_arrival("alice", 1.0, interaction="t") is None  # still in progress
    clock.now = 20.0
    fair.check_arrival("alice", 1.0)  # over the limit again within the window
    assert fair.check_arrival("alice", 1.0, interaction="t") is not None


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"alpah": 1}, "unknown keys"),
        ({"user_limit": 0}, "user_limit"),
        ({"overload_kv_usage": 1.5}, "overload_kv_usage"),
        ({"apps": {"qa": {"stages": []}}}, "apps.qa"),
        ({"apps": {"qa": {"stages": [{"input": -1}]}}}, "input"),
        ({"alpha": 0, "beta": 0, "gamma": 0}, "cannot all be 0"),
    ],
)
def test_bad_config_is_refused_with_a_clear_message(body, needle):
    with pytest.raises(OptionError, match=needle):
        FairScheduler(FairOptions(policy="fairserve", policy_config={"fairserve": body}))


def test_config_file_loads(tmp_path):
    fair = FairScheduler(FairOptions(policy="fairserve", policy_config="configs/fairserve_profiles.yaml"))
    assert fair.policy.profiles.expected("agent", 3).output == 300
    with pytest.raises(OptionError, match="cannot read"):
        FairScheduler(FairOptions(policy="fairserve", policy_config=str(tmp_path / "missing.yaml")))


def test_bad_arrival_inputs():
    fair = make()
    with pytest.raises(ValueError, match="kv_usage"):
        fair.check_arrival("alice", 1.5)
    with pytest.raises(ValueError, match="stage"):
        fair.enqueue("x", "alice", 10, stage=-1)
    with pytest.raises(ValueError, match="system_len"):
        fair.enqueue("y", "alice", 10, system_len=11)


@pytest.mark.parametrize("seed", range(3))
def test_abuse_scenario_throttles_only_the_abuser_and_never_mid_interaction(seed):
    """FairServe §5 on the step model: benign users of three apps, one abuser
    flooding multi-call interactions past the server's capacity."""
    jobs = abuse_mix(seed, steps=150)
    StepModel(128, jobs, policy="fairserve", policy_config=FAIRSERVE_CONFIG).run()
    assert all(j.throttled_at is None for j in jobs if j.well_behaved)
    assert any(j.throttled_at is not None for j in jobs if not j.well_behaved)
    assert all(j.throttled_at in (None, 0) for j in jobs)  # only first calls refused
    assert sum(j.wasted for j in jobs) == 0
    assert all(j.finish is not None for j in jobs if j.throttled_at is None)
    # The same checks catch plain rate limiting, which cuts interactions short.
    control = abuse_mix(seed, steps=150)
    StepModel(128, control, policy="fairserve", policy_cls=RequestRateLimit, policy_config=FAIRSERVE_CONFIG).run()
    assert any(j.throttled_at not in (None, 0) for j in control)
    assert sum(j.wasted for j in control) > 0


def test_abuse_scenario_without_overload_throttles_nothing():
    jobs = abuse_mix(0, steps=100)
    model = StepModel(100_000, jobs, policy="fairserve", policy_config=FAIRSERVE_CONFIG)
    model.run()
    assert model.throttled == 0 and all(j.finish is not None for j in jobs)
