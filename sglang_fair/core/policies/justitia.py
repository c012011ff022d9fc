"""Justitia (Justitia paper §IV): serve whole applications in fair completion order.

A job is one run of an application: all calls of one client with the same
interaction id, or a single call when it has none. When a job's first call
arrives its total cost C is predicted from the application type and the first
prompt (``DemandPredictor``) and it gets the virtual finish time
F = V(a) + C / w (w = client weight, 1 by default) of a fluid fair-share
reference system (``VirtualClock``). The waiting queue is ordered by the F
of each call's job, then by arrival, and the walk is strict: a job is served
with all the memory it can use before any job that would finish later under
fair sharing ("saturated serving in fair completion order"). Running calls are
never preempted for waiting ones, as in the paper.

The default cost is KV token-time (``kv-token-time``); any cost function
works, and predictions are in the units of the one in use. A finished job's
measured cost is added to the predictor's history (means are updated at once;
models are trained only at startup from ``history``, see ``DemandPredictor``).
A job with an interaction id is over when it has had no live call for
``job_idle_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.core.costs import Charge, make_cost
from sglang_fair.core.errors import OptionError
from sglang_fair.core.policies.base import Policy
from sglang_fair.core.policy_config import number, policy_section
from sglang_fair.core.predictor import DemandPredictor, prompt_length, truncate_prompt
from sglang_fair.core.requests import TrackedRequest
from sglang_fair.core.virtual_time import VirtualClock

_KEYS = {"history", "min_samples", "job_idle_s", "assumed_output_tokens", "fit"}
DEFAULT_APP = "default"

JobKey = tuple


@dataclass(slots=True)
class _Job:
    finish: float  # virtual finish time F
    app: str
    prompt: object  # start of the first prompt, for learning
    prompt_len: int
    predicted: float
    cost: float = 0.0  # measured so far, in cost units
    live: int = 0
    last_active: float = 0.0


class JustitiaPolicy(Policy):
    name = "justitia"
    default_cost = "kv-token-time"
    engine_order = False  # by virtual finish time

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        body, where = policy_section(self.options, "justitia", _KEYS)
        self.job_idle_s = number(body, "job_idle_s", 30.0, where, strict=True)
        self.assumed_output_tokens = int(number(body, "assumed_output_tokens", 128, where))
        try:
            self.predictor = DemandPredictor(min_samples=int(number(body, "min_samples", 20, where, minimum=2)))
        except ValueError as exc:
            raise OptionError(f"{where}: justitia: {exc}") from None
        history = body.get("history")
        if history is not None:
            try:
                self.predictor.load_history(str(history))
            except OSError as exc:
                raise OptionError(f"{where}: justitia.history: cannot read {history}: {exc}") from None
            except ValueError as exc:
                raise OptionError(f"{where}: justitia.history: {exc}") from None
            if body.get("fit", True):
                self.predictor.fit()
        # Same cost function as the scheduler's, for the no-history fallback.
        self._cost = make_cost(
            self.options.cost or self.default_cost, self.options.input_weight, self.options.output_weight
        )
        self.vclock = VirtualClock()
        self.jobs: dict[JobKey, _Job] = {}
        self.completed = 0  # jobs finished and learned from (metrics)
        self._last_sweep = self.clock()

    @staticmethod
    def job_key(req: TrackedRequest) -> JobKey:
        if req.interaction is not None:
            return (req.client, req.interaction)
        return (req.client, None, req.rid)

    def finish_time(self, req: TrackedRequest) -> float:
        """Virtual finish time of ``req``'s job (inf if unknown)."""
        job = self.jobs.get(self.job_key(req))
        return job.finish if job is not None else float("inf")

    def _fallback(self, input_len: int) -> float:
        d = self.assumed_output_tokens
        return self._cost.admission(input_len, 0) + self._cost.output(d, input_len)

    # -- events ---------------------------------------------------------------
    def on_request(self, req: TrackedRequest) -> None:
        self._sweep()
        key = self.job_key(req)
        job = self.jobs.get(key)
        if job is None:
            app = req.app or DEFAULT_APP
            predicted = self.predictor.predict(app, req.prompt, lambda: self._fallback(req.input_len))
            weight = self.options.weight_of(req.client)
            finish = self.vclock.arrive(predicted, weight)
            job = self.jobs[key] = _Job(finish, app, truncate_prompt(req.prompt), prompt_length(req.prompt), predicted)
        job.live += 1
        job.last_active = self.clock()

    def charge_request(self, req: TrackedRequest, charge: Charge) -> None:
        # The virtual clock and a job's cost count the work delivered, whatever the client's weight.
        delivered = charge.cost
        self.vclock.advance(delivered)
        job = self.jobs.get(self.job_key(req))
        if job is not None:
            job.cost += delivered

    def on_finish(self, req: TrackedRequest) -> None:
        key = self.job_key(req)
        job = self.jobs.get(key)
        if job is None:
            return
        job.live = max(0, job.live - 1)
        job.last_active = self.clock()
        if job.live == 0 and req.interaction is None:
            self._complete(key)

    def _complete(self, key: JobKey) -> None:
        job = self.jobs.pop(key)
        if job.cost > 0:
            self.predictor.observe(job.app, job.prompt, job.cost, job.prompt_len)
            self.completed += 1

    def _sweep(self) -> None:
        now = self.clock()
        if now - self._last_sweep < self.job_idle_s:
            return
        self._last_sweep = now
        horizon = now - self.job_idle_s
        for key in [k for k, j in self.jobs.items() if j.live == 0 and j.last_active < horizon]:
            self._complete(key)

    def forget(self, client: str) -> None:
        for key in [k for k, j in self.jobs.items() if k[0] == client and j.live == 0]:
            self._complete(key)

    # -- selection --------------------------------------------------------------
    def order(self, queue: list[TrackedRequest]) -> list[TrackedRequest]:
        return sorted(queue, key=lambda r: (self.finish_time(r), r.seq))
