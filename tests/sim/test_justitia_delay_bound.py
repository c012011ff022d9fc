"""Justitia's delay bound (Theorem 1: f_j - fbar_j <= 2 c_max + C_max / M) on the simulator.

The step-model version is tests/core/policies/test_justitia.py. Here the
server is the simulated SGLang worker (chunked prefill, KV budget,
retraction), in seconds:

* exact demands, as the theorem assumes: every application run (program) is
  its own application type, and ``justitia.history`` holds its exact KV
  token-time, so the per-type mean the policy predicts is exact;
* M: the service rate the simulated server actually delivered, KV token-time
  per second over the time some run was in the system;
* fbar_j: the exact fluid GPS finish time at rate M (every active run gets
  M / N_t);
* c_max, read as time as in the proof (Eq. 5: "the maximal inference
  runtime"): the longest first-token-to-last-token span of any call.

A shortest-job-first control fails the same check on the §V-C starvation
mix, so the check can fail.
"""

from __future__ import annotations

import json
import random

import pytest

from sglang_fair.runs.records import RequestRecord
from sglang_fair.core.policies import POLICIES
from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Call, Program, Workload
from tests.core.paper_scenarios import ShortestJobFirst
from tests.core.step_model import Job, gps_finish_times, kv_cost

SIZES = {"small": (1, 3), "medium": (4, 10), "large": (15, 30)}


def _prompt(rng: random.Random, lo: int, hi: int) -> tuple[int, ...]:
    return tuple(rng.randrange(32000) for _ in range(rng.randint(lo, hi)))


def application_mix(seed: int) -> Workload:
    """Small/medium/large runs at the paper's 72/26/2 %, parallel calls, bursty arrivals."""
    rng = random.Random(seed)
    programs, t = [], 0.0
    for k in range(rng.randint(20, 80)):
        t += rng.choice([0.0, 0.0, 0.0, 0.05, 0.1, 0.3])
        lo, hi = SIZES[rng.choices(list(SIZES), weights=[72, 26, 2])[0]]
        calls = tuple(Call(_prompt(rng, 100, 800), rng.randint(16, 200)) for _ in range(rng.randint(lo, hi)))
        programs.append(Program(f"j{k}", f"u{k % 5}", t, calls, kind=f"run{k}"))
    return Workload(f"mix-{seed}", programs)


def starvation_mix(mice_per_s: float = 20.0, duration_s: float = 20.0) -> Workload:
    """§V-C: an elephant (30 long calls) at t = 0, then mice (3 short calls) at
    ``mice_per_s`` for ``duration_s``, which alone overload the worker a little."""
    rng = random.Random(7)
    programs = [Program("elephant", "e", 0.0, tuple(Call(_prompt(rng, 1500, 1500), 200) for _ in range(30)),
                        kind="elephant")]
    t, k = 0.0, 0
    while t < duration_s:
        t += rng.expovariate(mice_per_s)
        calls = tuple(Call(_prompt(rng, 300, 600), rng.randint(40, 120)) for _ in range(3))
        programs.append(Program(f"m{k}", f"m{k % 4}", t, calls, kind=f"mouse{k}"))
        k += 1
    return Workload("starvation", programs)


def run_cost(program: Program) -> float:
    return sum(kv_cost(len(c.tokens), c.max_new_tokens) for c in program.calls)


def run_with_exact_demands(wl: Workload, kv_pool_tokens: int, tmp_path) -> list[RequestRecord]:
    history = tmp_path / "history.jsonl"
    with history.open("w") as f:
        for p in wl.programs:
            f.write(json.dumps({"app": p.kind, "prompt": list(p.calls[0].tokens), "cost": run_cost(p)}) + "\n")
    config = {"justitia": {"history": str(history), "fit": False}}
    result = SimBackend(policy="justitia", kv_pool_tokens=kv_pool_tokens,
                        fair={"policy_config": config}).run(wl, progress=False)
    assert not result.partial and len(result.records) == wl.num_calls()
    return result.records


def delay_excess(wl: Workload, records: list[RequestRecord]) -> tuple[float, float, dict[str, float]]:
    """(max_j f_j - fbar_j, the bound 2 c_max + C_max / M, f_j per program)."""
    finish: dict[str, float] = {}
    for r in records:
        finish[r.program_id] = max(finish.get(r.program_id, 0.0), r.t_done)
    spans = sorted((p.arrival, finish[p.program_id]) for p in wl.programs)
    busy, (start, end) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > end:
            busy, start, end = busy + end - start, s, e
        else:
            end = max(end, e)
    busy += end - start
    costs = [run_cost(p) for p in wl.programs]
    rate = sum(costs) / busy  # M, KV token-time per second
    jobs = []
    for p, cost in zip(wl.programs, costs):
        job = Job(p.arrival, [])
        job.cost = cost / rate  # seconds at rate M, so the GPS's float tolerance stays meaningful
        jobs.append(job)
    ideal = gps_finish_times(jobs, 1.0)
    c_max = max(r.t_done - r.t_first_token for r in records)
    bound = 2 * c_max + max(costs) / rate
    return max(finish[p.program_id] - g for p, g in zip(wl.programs, ideal)), bound, finish


@pytest.mark.parametrize("seed", range(8))
def test_delay_bound_on_randomized_application_mixes(seed, tmp_path):
    wl = application_mix(seed)
    pool = random.Random(seed).choice([20_000, 40_000, 80_000])
    excess, bound, _ = delay_excess(wl, run_with_exact_demands(wl, pool, tmp_path))
    assert excess <= bound, (excess, bound)


def test_starvation_bounded_for_justitia_not_for_shortest_first(tmp_path, monkeypatch):
    wl = starvation_mix()
    excess, bound, _ = delay_excess(wl, run_with_exact_demands(wl, 40_000, tmp_path))
    assert excess <= bound, (excess, bound)
    # The control orders by predicted run cost alone, so bigger runs wait for every smaller one.
    monkeypatch.setitem(POLICIES, "justitia", ShortestJobFirst)
    excess_sjf, bound_sjf, _ = delay_excess(wl, run_with_exact_demands(wl, 40_000, tmp_path))
    assert excess_sjf > bound_sjf, (excess_sjf, bound_sjf)
