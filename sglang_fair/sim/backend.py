"""``--backend sim``: replay a Workload on the simulated cluster, in virtual time.

Programs arrive at their arrival times; a call is sent when all its parents
finished (at the latest parent's finish time). With ``extends_parent`` its
prompt is the first parent's prompt, then that parent's output tokens
(synthesized deterministically per seed), then its own tokens. Every call
ends as exactly one RequestRecord: finished, or an error saying why (a
request that can never fit the KV pool, a failed parent, a dependency that
can never be met).
"""

from __future__ import annotations

import logging
import time
from dataclasses import fields

from tqdm import tqdm

from sglang_fair.runs.params import sim_params
from sglang_fair.runs.records import RequestRecord, RunResult
from sglang_fair.core import FairOptions
from sglang_fair.core.options import default_isolation
from sglang_fair.core.policies import check_policy_name
from sglang_fair.sim.cluster import SimCluster, SimConfig
from sglang_fair.sim.costmodel import load_profile
from sglang_fair.sim.worker import SimRequest, SimulationError
from sglang_fair.workloads.model import Program, Workload

_CONFIG_FIELDS = {f.name for f in fields(SimConfig)}
# FairOptions fields also accepted as simulator options (``--sim-opt isolation=true``).
_FAIR_FIELDS = {f.name for f in fields(FairOptions)} - {"policy"}
logger = logging.getLogger(__name__)


class SimBackend:
    """``SimBackend(policy, seed, num_workers=..., router=..., profile=..., fair={...})``.

    ``fair`` holds FairOptions fields other than the policy (quantum,
    weights, cost, client_weights, isolation, ...); they may also be given
    as keywords. The other keywords are SimConfig fields.
    """

    def __init__(self, policy: str = "fcfs", seed: int | None = None, fair: dict | None = None,
                 router_observer: object | None = None, **config: object) -> None:
        unknown = set(config) - _CONFIG_FIELDS - _FAIR_FIELDS
        if unknown:
            raise ValueError(f"unknown simulator option(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(sorted(_CONFIG_FIELDS | _FAIR_FIELDS))}")
        fair = dict(fair or {}) | {key: config.pop(key) for key in list(config) if key in _FAIR_FIELDS}
        self.config = SimConfig(**config)  # type: ignore[arg-type]
        self.config.check()
        # Unset isolation follows the server's default for the policy and worker count.
        fair.setdefault("isolation", default_isolation(policy, self.config.num_workers, self.config.router))
        self.options = FairOptions(policy=policy, **fair)
        check_policy_name(policy)  # unknown policy: fail now, not when the cluster is built
        load_profile(self.config.profile)  # unknown profile: fail now, not mid-run
        from sglang_fair.router import ROUTERS

        if self.config.router not in ROUTERS:
            raise ValueError(f"unknown router {self.config.router!r}; choose one of {', '.join(sorted(ROUTERS))}")
        self.seed = 0 if seed is None else seed
        self.router_observer = router_observer  # told where and why requests wait (GlobalDLPMRouter.observer)

    def run(self, workload: Workload, progress: bool = True) -> RunResult:
        started = time.perf_counter()
        seen: set[str] = set()
        for prog in workload.programs:  # record ids derive from program ids
            if prog.program_id in seen:
                raise ValueError(f"workload {workload.name!r}: program id {prog.program_id!r} is used more than once")
            seen.add(prog.program_id)
        cluster = SimCluster(self.config, self.options, seed=self.seed)
        if self.router_observer is not None:
            if not hasattr(cluster.router, "observer"):
                raise ValueError(f"router {self.config.router!r} tells no observer; d2lpm_global does")
            cluster.router.observer = self.router_observer
        replay = _Replay(workload, cluster, tqdm(total=workload.num_calls(), disable=not progress,
                                                 desc=f"sim {self.options.policy}", unit="req"))
        errors: list[str] = []
        try:
            replay.start()
            cluster.run(replay.finished, replay.refused)
            errors.extend(cluster.leaks())
        except SimulationError as e:
            errors.append(f"simulation stopped at t={cluster.now:.3f}s: {e}")
        replay.bar.close()
        records = replay.close(cluster.now)
        meta = {
            "backend": "sim",
            "policy": self.options.policy,
            "seed": self.seed,
            "sim_time_s": cluster.now,
            "wall_s": time.perf_counter() - started,
            "requests": len(records),
        } | cluster.meta()
        extrapolated = meta["extrapolated"]
        if any(extrapolated.values()):
            logger.warning("simulated times outside the fitted range of profile %s: %d prefill batches, "
                           "%d decode steps (meta.extrapolated)", meta["profile"], extrapolated["prefill"],
                           extrapolated["decode"])
        partial = bool(errors) or any(r.error for r in records)
        wc = cluster.worker_config
        params = sim_params(self.options, self.config.router, self.config.router_options, self.config.num_workers,
                            wc.kv_pool_tokens, wc.max_running_requests)
        return RunResult(records=records, partial=partial, errors=errors, meta=meta, params=params)


class _Replay:
    """Program dependency bookkeeping: turns finished calls into the next calls."""

    def __init__(self, workload: Workload, cluster: SimCluster, bar: tqdm) -> None:
        self.workload = workload
        self.cluster = cluster
        self.bar = bar
        self.pool = cluster.worker_config.kv_pool_tokens
        self.records: dict[tuple[int, int], RequestRecord] = {}
        self.done: dict[tuple[int, int], SimRequest] = {}
        self.waiting_parents: dict[tuple[int, int], int] = {}
        self.children: dict[tuple[int, int], list[int]] = {}

    def start(self) -> None:
        for p, prog in enumerate(self.workload.programs):
            for i, call in enumerate(prog.calls):
                bad = [j for j in call.parents if not 0 <= j < len(prog.calls) or j == i]
                if bad:
                    self._error(p, i, prog.arrival, f"call {i} of program {prog.program_id!r} has invalid parents {bad}")
                    continue
                self.waiting_parents[(p, i)] = len(set(call.parents))
                for j in set(call.parents):
                    self.children.setdefault((p, j), []).append(i)
            for i in prog.roots():
                if (p, i) not in self.records:
                    self._send(p, i, prog.arrival)

    def _send(self, p: int, i: int, t: float) -> None:
        prog = self.workload.programs[p]
        call = prog.calls[i]
        prompt = tuple(call.tokens)
        if call.extends_parent and call.parents:
            parent = self.done[(p, call.parents[0])]
            prompt = parent.prompt + parent.output_ids[: parent.out] + prompt
        if call.max_new_tokens < 1:
            self._error(p, i, t, f"max_new_tokens must be >= 1, got {call.max_new_tokens}")
        elif not prompt:
            self._error(p, i, t, "empty prompt")
        elif len(prompt) + call.max_new_tokens >= self.pool:
            self._error(p, i, t, f"prompt of {len(prompt)} tokens + max_new_tokens {call.max_new_tokens} "
                                 f"do not fit the simulated KV pool of {self.pool} tokens")
        else:
            # Identity as the live bench sends it (X-App-Id, X-Interaction-Id, X-Interaction-Stage).
            req = SimRequest(f"{prog.program_id}/{i}", prog.client, prompt, call.max_new_tokens, t, tag=(p, i),
                             app=prog.kind or None, interaction=prog.program_id, stage=i)
            self.cluster.submit(t, req)

    def finished(self, req: SimRequest) -> None:
        p, i = req.tag  # type: ignore[misc]
        prog = self.workload.programs[p]
        self.done[(p, i)] = req
        self.records[(p, i)] = RequestRecord(
            rid=req.rid, client=prog.client, program_id=prog.program_id, call_index=i,
            well_behaved=prog.well_behaved, t_sent=req.t_arrival, t_first_token=req.t_first_token,
            t_done=req.t_done, prompt_tokens=len(req.prompt), cached_tokens=req.cached_tokens,
            output_tokens=req.out, worker=req.worker, t_admitted=req.t_admitted, progress=req.progress,
            requeues=req.requeues, retractions=len(req.requeues),
        )
        self.bar.update()
        self._release_children(p, i, req.t_done)

    def refused(self, req: SimRequest, message: str) -> None:
        p, i = req.tag  # type: ignore[misc]
        self._error(p, i, req.t_arrival, message, prompt_tokens=len(req.prompt), worker=req.worker,
                    throttled=req.retry_after_s is not None, retry_after_s=req.retry_after_s)

    def _release_children(self, p: int, i: int, t: float) -> None:
        for child in self.children.get((p, i), ()):
            if (p, child) in self.records:
                continue
            self.waiting_parents[(p, child)] -= 1
            if self.waiting_parents[(p, child)] == 0:
                if any((p, j) not in self.done for j in self.workload.programs[p].calls[child].parents):
                    self._error(p, child, t, "parent failed")
                else:
                    self._send(p, child, t)

    def _error(self, p: int, i: int, t: float, message: str, prompt_tokens: int | None = None,
               worker: int | None = None, throttled: bool = False, retry_after_s: float | None = None) -> None:
        prog: Program = self.workload.programs[p]
        call = prog.calls[i]
        self.records[(p, i)] = RequestRecord(
            rid=f"{prog.program_id}/{i}", client=prog.client, program_id=prog.program_id, call_index=i,
            well_behaved=prog.well_behaved, t_sent=t, t_first_token=None, t_done=None,
            prompt_tokens=len(call.tokens) if prompt_tokens is None else prompt_tokens, cached_tokens=None,
            output_tokens=0, worker=worker, error=message, throttled=throttled, retry_after_s=retry_after_s,
        )
        self.bar.update()
        self._release_children(p, i, t)

    def close(self, now: float) -> list[RequestRecord]:
        """Every call gets a record: those never sent or never finished become errors."""
        for p, prog in enumerate(self.workload.programs):
            for i in range(len(prog.calls)):
                if (p, i) not in self.records:
                    reason = ("never finished: the simulation stopped" if (p, i) in self.done or self._sent(p, i)
                              else "never sent: its parents never all finished (dependency cycle?)")
                    self._error(p, i, now, reason)
        return [self.records[k] for k in sorted(self.records)]

    def _sent(self, p: int, i: int) -> bool:
        return self.waiting_parents.get((p, i), 0) == 0
