"""The backend interface: something that replays a Workload and returns records.

Two backends exist: the live HTTP client (``http://...`` / ``https://...``,
sglang_fair/bench/http_backend.py) and the simulator (``sim``,
sglang_fair/sim/backend.py, imported when chosen).
Every call of the workload ends as exactly one RequestRecord, ok or error;
``partial`` says the run stopped early or some calls failed.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from sglang_fair.runs.records import RunResult
from sglang_fair.workloads.model import Workload


@runtime_checkable
class Backend(Protocol):
    def run(self, workload: Workload, progress: bool = True) -> RunResult: ...


class BackendError(ValueError):
    """A backend spec that cannot be turned into a backend."""


API_CHOICES = ("generate", "openai")


def make_backend(
    spec: str,
    *,
    policy: str | None = None,
    api: str = "generate",
    timeout_s: float = 600.0,
    concurrency: int = 256,
    seed: int | None = None,
    sim_options: dict | None = None,
) -> Backend:
    """Resolve ``--backend``: a server URL or ``sim``.

    ``policy`` is only a label for a URL backend (the user started the server)
    but selects the scheduling policy of the simulator.
    """
    if spec == "sim":
        from sglang_fair.sim.backend import SimBackend  # lazily: the simulator imports this module

        return SimBackend(policy=policy or "fcfs", seed=seed, **(sim_options or {}))
    if spec.startswith(("http://", "https://")):
        from sglang_fair.bench.http_backend import HttpBackend

        return HttpBackend(spec, api=api, timeout_s=timeout_s, concurrency=concurrency, policy=policy)
    raise BackendError(f"unknown backend {spec!r}: expected a server URL (http://host:port) or 'sim'")
