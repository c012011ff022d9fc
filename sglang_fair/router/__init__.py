"""Data-parallel routing: engine-agnostic routers (D2LPM, baselines and peers).

``make_router(name, num_workers, **options)`` is the one way backends build a
router; ``ROUTERS`` maps each name to its class; ``with_worker_settings``
adds to a router's options what it must share with the workers.
"""

from __future__ import annotations

from sglang_fair.router.base import NoLiveWorkerError, Router
from sglang_fair.router.cache_aware import CacheAwareRouter
from sglang_fair.router.d2lpm import D2LPMRouter
from sglang_fair.router.dynamo import DynamoRouter
from sglang_fair.router.gie import GIERouter
from sglang_fair.router.global_dlpm import GlobalDLPMRouter
from sglang_fair.router.preble import PrebleRouter
from sglang_fair.router.round_robin import PerClientRoundRobinRouter, RoundRobinRouter
from sglang_fair.router.shortest_queue import ShortestQueueRouter
from sglang_fair.router.worker_settings import WorkerSettings, merge

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
        GIERouter,
        DynamoRouter,
    )
}


def make_router(name: str, num_workers: int, **options: object) -> Router:
    """Build the router registered as ``name``; unknown names and options are errors."""
    try:
        cls = ROUTERS[name]
    except KeyError:
        raise ValueError(f"unknown router {name!r}; choose one of {', '.join(sorted(ROUTERS))}") from None
    accepted = set(cls.option_defaults())
    unknown = set(options) - accepted
    if unknown:
        raise ValueError(
            f"router {name!r} does not take option(s) {', '.join(sorted(unknown))}; "
            f"it takes {', '.join(sorted(accepted)) or 'none'}"
        )
    if cls.options_type is not None:
        return cls(num_workers, cls.options_type(**options))
    return cls(num_workers, **options)


def with_worker_settings(name: str, options: dict, workers: WorkerSettings) -> dict:
    """``options`` plus what the router ``name`` must share with the workers, or may use
    (``router/worker_settings.py``); unknown names keep their options as they are."""
    cls = ROUTERS.get(name)
    return dict(options) if cls is None else merge(cls, options, workers)


__all__ = [
    "ROUTERS",
    "CacheAwareRouter",
    "D2LPMRouter",
    "DynamoRouter",
    "GIERouter",
    "GlobalDLPMRouter",
    "NoLiveWorkerError",
    "PerClientRoundRobinRouter",
    "PrebleRouter",
    "RoundRobinRouter",
    "Router",
    "ShortestQueueRouter",
    "WorkerSettings",
    "make_router",
    "with_worker_settings",
]
