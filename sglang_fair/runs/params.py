"""The scheduling configuration of a run, as ``summary.json`` records it (``run.params``).

The fairness bounds (docs/fairness.md) depend on the policy, its quantum and
token weights, the cost function, the router and its options, the number of
workers and each worker's KV pool. The simulator knows all of them
(``sim_params``); for a live server, ``sglang_fair/bench/server_params.py`` reads them
from ``/server_info``. A value nobody could tell is ``None``.
"""

from __future__ import annotations

from sglang_fair.core.options import FairOptions

PARAM_KEYS = (
    "policy", "quantum", "input_weight", "output_weight", "cost", "client_weights",
    "router", "router_options", "num_workers", "kv_pool_tokens", "max_running_requests",
    "isolation", "max_preemptions", "source",
)


def effective_cost(policy: str | None, cost: str | None) -> str | None:
    """The cost function a policy runs with: the option, else the policy's default."""
    if cost is not None or policy is None:
        return cost
    from sglang_fair.core.policies import POLICIES

    cls = POLICIES.get(policy)
    return cls.default_cost if cls is not None else None


def empty_params(source: str) -> dict:
    return {key: None for key in PARAM_KEYS} | {"source": source}


def sim_params(options: FairOptions, router: str, router_options: dict, num_workers: int,
               kv_pool_tokens: int, max_running_requests: int) -> dict:
    """Parameters of a simulated run (everything is known)."""
    return {
        "policy": options.policy,
        "quantum": options.quantum,
        "input_weight": options.input_weight,
        "output_weight": options.output_weight,
        "cost": effective_cost(options.policy, options.cost),
        "client_weights": dict(options.client_weights),
        "router": router,
        "router_options": dict(router_options),
        "num_workers": num_workers,
        "kv_pool_tokens": kv_pool_tokens,
        "max_running_requests": max_running_requests,
        "isolation": options.isolation,
        "max_preemptions": options.max_preemptions,
        "source": "sim",
    }
