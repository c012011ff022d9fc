"""Latency isolation in the simulator: a light client's chat beside a flood on a simulated H100.

The flood's 400 requests fill all 16 slots; the light client sends 12 short
requests one after another (``flood_and_chat`` of benchmarks/experiments/latency_isolation_sim.py).
The simulator is deterministic, so the targets are asserted as they are stated
for the real server.
"""

from __future__ import annotations

import statistics

import pytest

from benchmarks.experiments.latency_isolation_sim import flood_and_chat
from sglang_fair.bench.audit import audit_run
from sglang_fair.bench.output import write_run
from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Workload

SLOTS = 16


def _run(policy: str, isolation: bool, workload: Workload):
    result = SimBackend(policy=policy, isolation=isolation, max_running_requests=SLOTS).run(workload, progress=False)
    assert not result.partial, result.errors
    light = statistics.mean(r.t_done - r.t_sent for r in result.records if r.client == "light")
    return result, light


@pytest.fixture(scope="module")
def runs():
    idle = _run("dlpm", False, flood_and_chat(with_flood=False))[1]
    return idle, {(p, iso): _run(p, iso, flood_and_chat()) for p in ("dlpm", "vtc") for iso in (False, True)}


@pytest.mark.parametrize("policy", ["dlpm", "vtc"])
def test_isolation_meets_the_latency_and_throughput_targets(runs, policy):
    idle, results = runs
    (plain, plain_light), (isolated, isolated_light) = results[(policy, False)], results[(policy, True)]
    assert isolated_light <= 3 * idle < plain_light if policy == "dlpm" else isolated_light <= 3 * idle
    assert isolated_light < plain_light
    assert isolated.meta["sim_time_s"] <= 1.1 * plain.meta["sim_time_s"]  # the flood's makespan
    worker = isolated.meta["workers"][0]
    assert worker["preemptions"] > 0 and worker["recomputed_tokens"] > 0
    assert plain.meta["workers"][0]["preemptions"] == 0


def test_only_the_flood_is_preempted_and_each_request_at_most_once(runs):
    _, results = runs
    result, _ = results[("dlpm", True)]
    requeued = [r for r in result.records if r.requeues]
    assert requeued and all(r.client == "flooder" and len(r.requeues) == 1 for r in requeued)
    for r in requeued:
        (preempted, readmitted), = r.requeues
        assert r.t_admitted < preempted <= readmitted < r.t_done
        assert r.output_tokens == 64  # all tokens, once


def test_the_dlpm_bound_holds_with_isolation_on(runs, tmp_path):
    _, results = runs
    result, _ = results[("dlpm", True)]
    write_run(tmp_path, result, {"workload": "flood-and-chat"}, {"flooder": False, "light": True}, ServiceWeights(),
              plots=False)
    audit = audit_run(tmp_path)
    assert audit.bound.theorem and not audit.violated, audit.to_dict()


def test_a_light_clients_running_requests_decode_between_the_floods_prefills():
    """Two workers behind d2lpm_global, a flood of unique 1,024-token prompts beside a tenant whose 16-token
    answers follow a cached system prompt (open_flood_sim's ``cached-prefix``): admitted at once, its
    requests would decode only when the flood's prefills pause; isolation's decode turns put a decode
    step after each chunk of prefill (2,048 tokens here) while they run."""
    from benchmarks.experiments.open_flood_sim import SIM, flood_workload

    workload = flood_workload("cached-prefix", workers=2, flood=2.0, light=0.05, duration=4.0, seed=0)
    decoding = {}
    for isolation in (False, True):
        result = SimBackend(policy="dlpm", isolation=isolation, num_workers=2, router="d2lpm_global",
                            **(SIM | {"chunked_prefill_size": 2048})).run(workload, progress=False)
        assert not result.partial, result.errors
        decoding[isolation] = max(r.t_done - r.t_first_token for r in result.records if r.client == "good-0")
    assert decoding[True] <= 0.3 * decoding[False], decoding
