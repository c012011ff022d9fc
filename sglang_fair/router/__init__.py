"""Data-parallel routing: engine-agnostic routers (D2LPM and baselines).

``make_router(name, num_workers, **options)`` is the one way backends build a
router; ``ROUTERS`` maps each name to its class.
"""

from __future__ import annotations

import inspect

from sglang_fair.router.base import NoLiveWorkerError, Router
from sglang_fair.router.cache_aware import CacheAwareRouter
from sglang_fair.router.d2lpm import D2LPMRouter
from sglang_fair.router.global_dlpm import GlobalDLPMRouter
from sglang_fair.router.preble import PrebleRouter
from sglang_fair.router.round_robin import PerClientRoundRobinRouter, RoundRobinRouter
from sglang_fair.router.shortest_queue import ShortestQueueRouter

ROUTERS: dict[str, type[Router]] = {
    cls.name: cls
    for cls in (
        RoundRobinRouter,
        PerClientRoundRobinRouter,
        ShortestQueueRouter,
        PrebleRouter,
        CacheAwareRouter,
        D2LPMRouter,
        GlobalDLPMRouter,
    )
}


def make_router(name: str, num_workers: int, **options: object) -> Router:
    """Build the router registered as ``name``; unknown names and options are errors."""
    try:
        cls = ROUTERS[name]
    except KeyError:
        raise ValueError(f"unknown router {name!r}; choose one of {', '.join(sorted(ROUTERS))}") from None
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "num_workers"}
    unknown = set(options) - accepted
    if unknown:
        raise ValueError(
            f"router {name!r} does not take option(s) {', '.join(sorted(unknown))}; "
            f"it takes {', '.join(sorted(accepted)) or 'none'}"
        )
    return cls(num_workers, **options)


_POLICY_WEIGHTS = (("input_weight", "--fair-input-weight"), ("output_weight", "--fair-output-weight"))


def with_policy_settings(name: str, options: dict, input_weight: float, output_weight: float,
                         quantum: float | None = None, max_running_requests: int | None = None,
                         client_weights: dict[str, float] | None = None, isolation: bool = False,
                         mixed_chunk_tokens: int | None = None) -> dict:
    """``options`` plus what the router must share with the workers' policy.

    A router that charges tokens (D²LPM) takes the policy's cost weights, so
    the router and the workers price a token alike; a router option that
    contradicts one is an error naming both. A router whose deficit quantum is
    the cluster's Q^u (``Router.follows_policy_quantum``) takes the policy's
    ``quantum`` unless its own options set one, a router that weighs
    clients (``client_weights``) the workers' ``--fair-client-weights``, and
    one that can keep a place for newcomers (``reserve_for_newcomers``) does
    so under the workers' ``--fair-isolation``. A router that asks for the
    workers' ``--max-running-requests`` (``worker_max_running``) gets it when set, and
    one that asks for their ``--chunked-prefill-size`` (``worker_chunk_tokens``) gets it
    when they mix chunks (``--enable-mixed-chunk``; ``mixed_chunk_tokens``).
    """
    cls = ROUTERS.get(name)
    if cls is None:
        return dict(options)
    accepted = inspect.signature(cls.__init__).parameters
    merged = dict(options)
    for (key, flag), value in zip(_POLICY_WEIGHTS, (input_weight, output_weight)):
        if key not in accepted:
            continue
        given = merged.get(key, value)
        if not isinstance(given, (int, float)) or isinstance(given, bool) or float(given) != float(value):
            raise ValueError(f"router option {key}={given!r} contradicts {flag} {value}: the router charges "
                             f"with the workers' weights, so set {flag} alone")
        merged[key] = float(value)
    if quantum is not None and cls.follows_policy_quantum:
        merged.setdefault("quantum", float(quantum))
    if client_weights and "client_weights" in accepted:
        merged.setdefault("client_weights", dict(client_weights))
    if isolation and "reserve_for_newcomers" in accepted:
        merged.setdefault("reserve_for_newcomers", True)
    if max_running_requests is not None and "worker_max_running" in accepted:
        merged.setdefault("worker_max_running", int(max_running_requests))
    if mixed_chunk_tokens is not None and mixed_chunk_tokens > 0 and "worker_chunk_tokens" in accepted:
        merged.setdefault("worker_chunk_tokens", int(mixed_chunk_tokens))
    return merged


__all__ = [
    "ROUTERS",
    "CacheAwareRouter",
    "D2LPMRouter",
    "GlobalDLPMRouter",
    "NoLiveWorkerError",
    "PerClientRoundRobinRouter",
    "PrebleRouter",
    "RoundRobinRouter",
    "Router",
    "ShortestQueueRouter",
    "make_router",
    "with_policy_settings",
]
