"""Tensor-parallel ranks each run a copy of the fair scheduler and must take the same decisions.

Every rank of a ``--tp N`` server is its own process (its own hash seed) and
sees the same requests and batch results, but its own clock reads
differently. Copies of a scheduler are fed the same events and must
throttle, order, admit and forget alike: they do when they read one clock.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from sglang_fair.core import FairOptions, FairScheduler, RequestState
from sglang_fair.core.stamp_clock import StampClock
from tests.support.clock import FakeClock

CLIENTS = ("a", "b", "c", "tenant-7", "x@y")
POLICIES = ("dlpm", "vtc", "fairserve", "justitia")
POLICY_CONFIG = {
    "fairserve": {"window_s": 1.0, "user_limit": 3, "interaction_idle_s": 0.5},
    "justitia": {"job_idle_s": 0.5},
}



def script(seed: int, length: int = 80) -> list:
    """Events ``(dt, event, skew)``: arrivals, admission passes, decode steps, finishes."""
    rng = random.Random(seed)
    out = []
    for _ in range(length):
        kind = rng.choice(["arrive", "arrive", "admit", "decode", "finish"])
        event = {"arrive": lambda: ["arrive", rng.choice(CLIENTS), rng.randint(1, 400), rng.choice([None, "x", "y"])],
                 "admit": lambda: ["admit", rng.randint(1, 4)],
                 "decode": lambda: ["decode", rng.randint(1, 64)],
                 "finish": lambda: ["finish", rng.randint(0, 3)]}[kind]()
        out.append([rng.choice([0.0, 0.01, 0.2, 0.6, 1.5]), event, rng.uniform(0.0, 0.1)])
    return out


def replay(policy: str, events: list, skewed: bool, stamped: bool = False) -> list:
    """The decisions of one scheduler copy; ``skewed``: this rank sees each event up to 100 ms
    later. ``stamped``: as the binding runs a tensor-parallel rank, time is one clock's stamps
    (rank 0's, the same on every rank; here given at arrivals), and a skewed rank also sweeps
    idle clients at moments of its own."""
    options = dict(policy=policy, quantum=256.0, idle_timeout_s=1.0)
    if policy in POLICY_CONFIG:
        options["policy_config"] = {policy: POLICY_CONFIG[policy]}
    local = FakeClock()
    fair = FairScheduler(FairOptions(**options), clock=StampClock() if stamped else local)
    decisions: list = []
    t = 0.0
    for seq, (dt, event, skew) in enumerate(events):
        t += dt
        local.now = t + (skew if skewed else 0.0)
        if event[0] == "arrive":
            _, client, length, app = event
            if stamped:
                fair.at_arrival_stamp(t)
                decisions.append(["known", sorted(fair.activity)])
            refused = fair.check_arrival(client, kv_usage=0.95, app=app)
            decisions.append(["throttled", refused is not None])
            if refused is None:
                fair.enqueue(f"r{seq}", client, length, app=app, prompt=list(range(length)))
        elif event[0] == "admit":
            queued = [r for r in fair.requests.values() if r.state is RequestState.QUEUED]
            admitted = []
            for candidate in fair.walk(fair.order(queued)):
                if len(admitted) == event[1]:
                    break
                fair.admit(candidate, 0)
                admitted.append(candidate.rid)
            decisions.append(["admitted", admitted])
        elif event[0] == "decode":
            for req in [r for r in fair.requests.values() if r.state is RequestState.RUNNING]:
                fair.produced(req, req.output_charged + event[1])
        else:
            running = sorted((r for r in fair.requests.values() if r.state is RequestState.RUNNING), key=lambda r: r.rid)
            if running:
                fair.finish(running[event[1] % len(running)])
        if not stamped:
            decisions.append(["forgotten", sorted(fair.collect_idle())])
        elif skewed and skew > 0.05:
            fair.collect_idle()  # the rank's own once-a-second sweep, wherever it falls
    return decisions


def _in_process(hash_seed: int) -> dict:
    code = ("import json; from tests.core.test_rank_agreement import POLICIES, replay, script; "
            "print(json.dumps({p: [replay(p, script(s), skewed=False) for s in range(25)] for p in POLICIES}))")
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def test_ranks_in_processes_with_different_hash_seeds_take_the_same_decisions():
    first, second = _in_process(1), _in_process(2)
    assert set(first) == set(POLICIES)
    for policy in POLICIES:
        assert any(d[0] == "admitted" and d[1] for run in first[policy] for d in run), policy  # it really admitted
        assert first[policy] == second[policy], policy


@pytest.mark.parametrize("policy", POLICIES)
def test_ranks_reading_their_own_clocks_up_to_100_ms_apart_can_disagree(policy):
    # Why the ranks read the arrivals' stamps: a client idle for about the timeout is forgotten on
    # one rank and not yet on another (and FairServe's windows, Justitia's job timeout likewise).
    differ = [seed for seed in range(25) if replay(policy, script(seed), skewed=False) != replay(policy, script(seed), skewed=True)]
    assert differ, "no script made skewed clocks matter; the scripts no longer test what they should"


@pytest.mark.parametrize("policy", POLICIES)
def test_ranks_reading_the_arrival_stamps_take_the_same_decisions_whenever_they_sweep(policy):
    forgot = 0
    for seed in range(25):
        first = replay(policy, script(seed), skewed=False, stamped=True)
        assert first == replay(policy, script(seed), skewed=True, stamped=True), seed
        known = [set(d[1]) for d in first if d[0] == "known"]
        forgot += any(earlier - later for earlier, later in zip(known, known[1:]))
    assert forgot, "no client was ever forgotten: the scripts do not reach the idle timeout"


def test_a_stamp_clock_never_goes_back():
    clock = StampClock()
    clock.observe(5.0)
    clock.observe(4.0)  # a later arrival stamped a little earlier (another tokenizer thread)
    assert clock() == 5.0


def test_the_admission_digest_follows_every_admission_in_order():
    def admit_all(order: list[str]) -> FairScheduler:
        fair = FairScheduler(FairOptions(policy="dlpm"), clock=lambda: 0.0)
        reqs = {rid: fair.enqueue(rid, "a", 10) for rid in sorted(order)}
        for rid in order:
            fair.admit(reqs[rid], 0)
        return fair

    same, again, swapped = admit_all(["r1", "r2"]), admit_all(["r1", "r2"]), admit_all(["r2", "r1"])
    assert (same.admissions, same.admission_digest()) == (again.admissions, again.admission_digest()) == (2, same.admission_digest())
    assert swapped.admission_digest() != same.admission_digest()
    assert FairScheduler(FairOptions(policy="dlpm")).admission_digest() != same.admission_digest()
