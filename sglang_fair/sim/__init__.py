"""A simulated SGLang cluster driven by the same FairScheduler and router objects.

``SimBackend`` (backend.py) replays a Workload in virtual time on ``SimCluster``
(cluster.py): D ``SimWorker``s (worker/: SGLang's scheduler loop, KV pool,
``RadixCache`` from radix.py) behind a router, timed by a ``CostModel``
(costmodel.py) fitted to GPU measurements (fit.py). No SGLang import.
"""

from sglang_fair.sim.cluster import SimCluster, SimConfig
from sglang_fair.sim.costmodel import CostModel, Profile, ProfileError, available_profiles, load_profile
from sglang_fair.sim.radix import RadixCache
from sglang_fair.sim.worker import SimRequest, SimulationError, SimWorker, WorkerConfig

__all__ = [
    "CostModel",
    "Profile",
    "ProfileError",
    "RadixCache",
    "SimCluster",
    "SimConfig",
    "SimRequest",
    "SimWorker",
    "SimulationError",
    "WorkerConfig",
    "available_profiles",
    "load_profile",
]
