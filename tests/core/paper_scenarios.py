"""The Justitia and FairServe papers' scenarios on the step model (tests/core/step_model.py).

Test support, and a small comparison that docs/results/2026-11-22-fairserve-justitia-step-model.md quotes:

    PYTHONPATH=. python -m tests.core.paper_scenarios

Times are model steps (one decode iteration), not seconds; the KV cache has
M token slots. The same policy code as the real engines is driven through
FairScheduler, so this compares scheduling decisions, not engine speed.
"""

from __future__ import annotations

import copy
import random
import statistics

from sglang_fair.core.policies.fairserve import FairServePolicy
from sglang_fair.core.policies.justitia import JustitiaPolicy
from tests.core.step_model import Job, StepModel, gps_finish_times, kv_cost

# -- Justitia (§V-A mix, §V-C starvation) ---------------------------------------


def make_job(rng: random.Random, arrival: int, size: str) -> Job:
    """An application run of the paper's size classes, as parallel calls."""
    count = {"small": (1, 3), "medium": (4, 10), "large": (15, 30)}[size]
    calls = [(rng.randint(4, 24), rng.randint(1, 8)) for _ in range(rng.randint(*count))]
    return Job(arrival, calls, app=size)


def application_mix(seed: int, jobs: int, gaps: tuple[int, ...]) -> list[Job]:
    """Small/medium/large applications at the paper's 72/26/2 % mix."""
    rng = random.Random(seed)
    out, t = [], 0
    for _ in range(jobs):
        t += rng.choice(gaps)
        out.append(make_job(rng, t, rng.choices(["small", "medium", "large"], weights=[72, 26, 2])[0]))
    return out


def starvation_mix(mice_steps: int) -> list[Job]:
    """§V-C: an elephant at t=0, then 2.2 mice per step (each 3 small calls) for
    ``mice_steps`` steps: 99% of M = 200 in KV token-time, so a shortest-first
    server is never free for the elephant while mice keep coming."""
    jobs, due = [Job(0, [(16, 6)] * 10)], 0.0
    for t in range(mice_steps):
        due += 2.2
        while due >= 1:
            due -= 1
            jobs.append(Job(t, [(8, 3)] * 3))
    return jobs


class ShortestJobFirst(JustitiaPolicy):
    """SRJF control (not a policy of the project): order by predicted job cost alone."""

    def order(self, queue):
        return sorted(queue, key=lambda r: (self.jobs[self.job_key(r)].predicted, r.seq))


def delay_excess(jobs: list[Job], capacity: int, policy_cls=JustitiaPolicy) -> tuple[float, float]:
    """(max over jobs of f_j - fbar_j with exact demands, the bound 2 c_max + C_max / M)."""
    real = StepModel(capacity, jobs, policy_cls=policy_cls, oracle=True).run()
    ideal = gps_finish_times(jobs, capacity)
    c_max = max(kv_cost(p, d) for job in jobs for p, d in job.calls)
    bound = 2 * c_max + max(job.cost for job in jobs) / capacity
    return max(f - g for f, g in zip(real, ideal)), bound


# -- FairServe (§5: benign and abusive users, multi-call interactions) -----------

APPS = {
    # app: (calls per interaction, prompt range, decode range)
    "qa": (1, (8, 16), (2, 4)),
    "summarize": (1, (40, 60), (1, 2)),
    "agent": (3, (10, 20), (3, 6)),
}
FAIRSERVE_CONFIG = {
    "fairserve": {
        "window_s": 20,
        "user_limit": 20,
        "overload_kv_usage": 0.9,
        "apps": {
            "qa": {"stages": [{"input": 12, "output": 3}]},
            "summarize": {"stages": [{"input": 50, "output": 1.5}]},
            "agent": {"stages": [{"input": 15, "output": 4.5}]},
        },
    }
}


def abuse_mix(seed: int, steps: int = 300) -> list[Job]:
    """Six benign users (two per app) at a modest rate, one abuser flooding
    qa and agent interactions at ~1.5 per step (over the server's capacity)."""
    rng = random.Random(seed)
    jobs = []
    users = [(f"{app}-user{i}", app, 0.08, True) for app in APPS for i in range(2)]
    users.append(("abuser", None, 1.5, False))
    for t in range(steps):
        for client, app, rate, benign in users:
            for _ in range(int(rate) + (rng.random() < rate - int(rate))):
                kind = app or rng.choice(["qa", "agent"])
                n, (p0, p1), (d0, d1) = APPS[kind]
                calls = [(rng.randint(p0, p1), rng.randint(d0, d1)) for _ in range(n)]
                jobs.append(Job(t, calls, sequential=True, app=kind, client=client, well_behaved=benign))
    return jobs


class RequestRateLimit(FairServePolicy):
    """RPM control (not a policy of the project): the same limits applied to
    every request, overloaded or not, inside interactions or not."""

    def should_throttle(self, client, app, interaction, kv_usage):
        now = self.clock()
        self.limiter.record(client, app, now)
        return self.limiter.exceeded(client, app, now)


def fairserve_row(name: str, jobs: list[Job], capacity: int, **model) -> dict:
    sim = StepModel(capacity, jobs, **model)
    sim.run()
    benign = [j for j in jobs if j.well_behaved]
    abusive = [j for j in jobs if not j.well_behaved]
    done = [j.finish - j.arrival for j in benign if j.finish is not None]
    return {
        "policy": name,
        "benign mean / P90 interaction time": f"{statistics.mean(done):.1f} / {statistics.quantiles(done, n=10)[-1]:.1f}",
        "benign completed": f"{len(done)}/{len(benign)}",
        "abuser completed": f"{sum(j.finish is not None for j in abusive)}/{len(abusive)}",
        "throttled calls (benign/abuser)": f"{sum(j.throttled_at is not None for j in benign)}/"
        f"{sum(j.throttled_at is not None for j in abusive)}",
        "mid-interaction refusals": sum(j.throttled_at not in (None, 0) for j in jobs),
        "wasted tokens": sum(j.wasted for j in jobs),
        "steps to drain": sim.steps,
    }


def _table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    capacity = 128
    rows = {}
    variants = [
        ("fcfs", dict(policy="fcfs")),
        ("vtc", dict(policy="vtc")),
        ("dlpm", dict(policy="dlpm")),
        ("fairserve", dict(policy="fairserve")),
        ("justitia (online per-type mean)", dict(policy="justitia")),
        ("justitia (exact demand)", dict(policy="justitia", oracle=True)),
    ]
    for seed in range(5):
        jobs = application_mix(seed, 150, (0, 0, 0, 1, 1, 2))
        gps = gps_finish_times(jobs, capacity)
        for name, kw in variants:
            run = copy.deepcopy(jobs)
            finish = StepModel(capacity, run, **kw).run()
            jct = [f - j.arrival for f, j in zip(finish, run)]
            r = rows.setdefault(name, ([], [], []))
            r[0].append(statistics.mean(jct))
            r[1].append(statistics.quantiles(jct, n=10)[-1])
            r[2].append(max(f - g for f, g in zip(finish, gps)))
    print(f"Justitia §V-A mix: 5 seeds x 150 applications (72/26/2 % small/medium/large), M = {capacity}")
    print(_table([
        {"policy": n, "mean JCT": f"{statistics.mean(a):.1f}", "P90 JCT": f"{statistics.mean(b):.1f}",
         "max f_j - fbar_j": f"{max(c):.1f}"}
        for n, (a, b, c) in rows.items()
    ]))
    print()
    print("Justitia §V-C starvation (elephant + 2.2 mice/step for 600 steps, M = 200), exact demands")
    for name, cls in (("justitia", JustitiaPolicy), ("shortest-job-first control", ShortestJobFirst)):
        jobs = starvation_mix(600)
        excess, bound = delay_excess(jobs, 200, cls)
        print(f"- {name}: elephant finished at step {jobs[0].finish}; max f_j - fbar_j = {excess:.1f} (bound {bound:.1f})")
    print()
    jobs = abuse_mix(0)
    print(f"FairServe abuse scenario: {len(jobs)} interactions over 300 steps, M = {capacity}")
    print(_table([
        fairserve_row("vtc", copy.deepcopy(jobs), capacity, policy="vtc"),
        fairserve_row("fairserve, no limits (W)", copy.deepcopy(jobs), capacity, policy="fairserve",
                      policy_config={"fairserve": {**FAIRSERVE_CONFIG["fairserve"], "user_limit": None}}),
        fairserve_row("fairserve (W+I)", copy.deepcopy(jobs), capacity, policy="fairserve",
                      policy_config=FAIRSERVE_CONFIG),
        fairserve_row("fairserve (W+I), overload at 80% KV", copy.deepcopy(jobs), capacity, policy="fairserve",
                      policy_config={"fairserve": {**FAIRSERVE_CONFIG["fairserve"], "overload_kv_usage": 0.8}}),
        fairserve_row("rate limit always (RPM control)", copy.deepcopy(jobs), capacity, policy="fairserve",
                      policy_cls=RequestRateLimit, policy_config=FAIRSERVE_CONFIG),
    ]))


if __name__ == "__main__":
    main()
