"""``--backend``: a live server (``http://...`` / ``https://...``, ``http_backend.py``) or the simulator (``sim``)."""

from __future__ import annotations

from sglang_fair.bench.backend import Backend, BackendError
from sglang_fair.bench.http_backend import HttpBackend
from sglang_fair.sim.backend import SimBackend


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
        return SimBackend(policy=policy or "fcfs", seed=seed, **(sim_options or {}))
    if spec.startswith(("http://", "https://")):
        return HttpBackend(spec, api=api, timeout_s=timeout_s, concurrency=concurrency, policy=policy)
    raise BackendError(f"unknown backend {spec!r}: expected a server URL (http://host:port) or 'sim'")
