"""A small deterministic step model of a KV-bound server, and its fluid GPS reference.

Test support only (the real engines are SGLang and sglang_fair.sim). It is
work-conserving in KV token-time, as Justitia's Theorem 1 assumes: an
inference at its k-th decode step holds p + k slots of the M-slot cache, and
each step charges exactly the slots in use. Each step:

1. arrivals: each job's calls are sent (all at once, or one after another when
   ``sequential``); a call first goes through ``check_arrival`` with the
   current KV usage and is refused if the policy throttles it;
2. if the running inferences' growth would overflow M, swap out the
   lowest-priority ones (back to the queue with their progress, like vLLM's
   swap);
3. admit queued calls in the policy's order while the next step's slots fit,
   stopping at the first that does not (as SGLang does);
4. every running inference decodes one token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core import FairOptions, FairScheduler
from sglang_fair.core.requests import RequestState


def kv_cost(p: int, d: int) -> float:
    return p * d + d * (d + 1) / 2


@dataclass
class Job:
    """One application run (one interaction) of one client."""

    arrival: int
    calls: list[tuple[int, int]]  # (prompt p, decode d) per call
    sequential: bool = False  # call i+1 is sent when call i finishes
    app: str | None = None
    client: str | None = None  # default: one client per job
    well_behaved: bool = True
    cost: float = 0.0  # total KV token-time, set from calls
    sent: int = 0
    done: int = 0
    finish: int | None = None
    throttled_at: int | None = None  # index of the refused call, if any
    wasted: int = 0  # tokens processed for a run that was then refused

    def __post_init__(self) -> None:
        self.cost = sum(kv_cost(p, d) for p, d in self.calls)


class Oracle:
    """Justitia demand predictor that knows each job's cost (prompt[0] = job index)."""

    def __init__(self, costs: dict[int, float]) -> None:
        self.costs = costs

    def predict(self, app, prompt, fallback=None):
        return self.costs[prompt[0]]

    def observe(self, app, prompt, cost, length=None):
        pass


@dataclass
class StepModel:
    capacity: int
    jobs: list[Job]
    policy: str = "justitia"
    policy_cls: type | None = None  # a test-double policy instead of the registered one
    oracle: bool = False  # Justitia-like policies get exact job costs
    policy_config: dict | None = None
    throttled: int = 0
    steps: int = 0
    _running: list = field(default_factory=list)

    def run(self, max_steps: int = 1_000_000) -> list[int | None]:
        t = [0]
        opts = FairOptions(policy=self.policy, policy_config=self.policy_config)
        fair = FairScheduler(opts, clock=lambda: float(t[0]))
        if self.policy_cls is not None:
            fair.policy = self.policy_cls(fair.options, fair.activity, fair.clock)
        if self.oracle:
            fair.policy.predictor = Oracle({j: job.cost for j, job in enumerate(self.jobs)})
        pending = sorted(range(len(self.jobs)), key=lambda j: self.jobs[j].arrival)
        ready: list[int] = []  # sequential jobs whose next call is due
        spec: dict[str, tuple[int, int]] = {}
        running = self._running
        rid = 0

        def slots(req) -> int:  # slots held after this request's next step
            return req.input_len + req.output_charged + 1

        def send(j: int, used: int) -> None:
            nonlocal rid
            job = self.jobs[j]
            batch = [job.sent] if job.sequential else list(range(len(job.calls)))
            for i in batch:
                p, d = job.calls[i]
                client = job.client or f"c{j}"
                interaction = f"job{j}"
                decision = fair.check_arrival(client, min(1.0, used / self.capacity), job.app, interaction)
                if decision is not None:
                    self.throttled += 1
                    job.throttled_at = i
                    job.wasted = sum(p2 + d2 for p2, d2 in job.calls[: job.done])
                    return
                rid += 1
                spec[f"r{rid}"] = (j, d)
                fair.enqueue(f"r{rid}", client, p, app=job.app, interaction=interaction, stage=i, prompt=[j])
                job.sent += 1

        while (pending or ready or fair.requests) and t[0] < max_steps:
            used = sum(slots(r) for r in running)
            while pending and self.jobs[pending[0]].arrival <= t[0]:
                send(pending.pop(0), used)
            for j in ready:
                send(j, used)
            ready = []
            while used > self.capacity:  # growth overflow: swap out the last in priority
                victim = fair.order(running)[-1]
                running.remove(victim)
                fair.requeue(victim)
                used -= slots(victim)
            queue = [r for r in fair.requests.values() if r.state is RequestState.QUEUED]
            for req in fair.walk(fair.order(queue)):
                if used + slots(req) > self.capacity:
                    break
                used += slots(req)
                fair.admit(req, 0)
                running.append(req)
            still = []
            for req in running:
                j, d = spec[req.rid]
                fair.produced(req, req.output_charged + 1)
                if req.output_charged < d:
                    still.append(req)
                    continue
                fair.finish(req)
                job = self.jobs[j]
                job.done += 1
                if job.done == len(job.calls):
                    job.finish = t[0] + 1
                elif job.sequential and job.throttled_at is None:
                    ready.append(j)
            running[:] = still
            t[0] += 1
        self.steps = t[0]
        self.fair = fair
        return [job.finish for job in self.jobs]


def gps_finish_times(jobs: list[Job], capacity: float) -> list[float]:
    """Exact fluid GPS: every active job is served at capacity / N_t."""
    order = sorted(range(len(jobs)), key=lambda j: jobs[j].arrival)
    remaining: dict[int, float] = {}
    finish = [0.0] * len(jobs)
    now, i = 0.0, 0
    while i < len(order) or remaining:
        next_arrival = jobs[order[i]].arrival if i < len(order) else float("inf")
        rate = capacity / len(remaining) if remaining else 0.0
        j_min = min(remaining, key=remaining.get) if remaining else None
        t_done = now + remaining[j_min] / rate if remaining else float("inf")
        step_to = min(next_arrival, t_done)
        for j in remaining:
            remaining[j] -= (step_to - now) * rate
        now = step_to
        if next_arrival <= t_done:
            remaining[order[i]] = jobs[order[i]].cost
            i += 1
        for j in [j for j, r in remaining.items() if r <= 1e-9]:
            finish[j] = now
            del remaining[j]
    return finish
