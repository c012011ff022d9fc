"""Prometheus gauges of the data-parallel router, exported with SGLang's metrics (``--enable-metrics``).

Refreshed at most once a second from ``Router.snapshot()``; labelled
``dp_rank`` (the worker) and, for per-client state, ``client``:

* ``sglang_fair:router_inflight_requests``: dispatched and not yet finished;
  the queue size the router balances on (it only falls when completions
  arrive over the side channel);
* ``sglang_fair:router_worker_alive``: 1, or 0 once the worker died;
* ``sglang_fair:router_cached_tokens``: tokens the global prefix index
  believes the worker caches (routers with an index);
* ``sglang_fair:router_client_deficit``: D²LPM's deficit q_{i,w} of each
  client on each worker (series of forgotten idle clients are removed);
* ``sglang_fair:router_unrouted_requests``: requests placed on a random live
  worker, untracked, because the router raised.

Routers that hold requests (``d2lpm_global``) add:

* ``sglang_fair:router_held_requests``: requests waiting in the router for a
  worker with room;
* ``sglang_fair:router_client_global_deficit``: the one cluster-wide deficit
  counter of each client (labelled ``client``; forgotten clients are removed).
"""

from __future__ import annotations

import time

from sglang_fair.router.base import RouterSnapshot

_PER_WORKER = {
    "router_inflight_requests": "Requests dispatched to the worker and not finished",
    "router_worker_alive": "1 while the worker is alive, 0 once it died",
    "router_cached_tokens": "Tokens the router's prefix index believes the worker caches",
}


class RouterMetrics:
    def __init__(self, every_s: float = 1.0, registry=None) -> None:
        import prometheus_client  # after SGLang set PROMETHEUS_MULTIPROC_DIR

        registry = registry or prometheus_client.REGISTRY

        def gauge(name: str, doc: str, labels: list[str]):
            return prometheus_client.Gauge(f"sglang_fair:{name}", doc, labels, registry=registry,
                                           multiprocess_mode="mostrecent")

        self.per_worker = {name: gauge(name, doc, ["dp_rank"]) for name, doc in _PER_WORKER.items()}
        self.deficit = gauge("router_client_deficit", "D2LPM deficit of a client on a worker", ["client", "dp_rank"])
        self.unrouted = gauge("router_unrouted_requests", "Requests placed untracked after a router error", [])
        self.held = gauge("router_held_requests", "Requests waiting in the router for a worker with room", [])
        self.global_deficit = gauge("router_client_global_deficit",
                                    "Cluster-wide deficit of a client (late-binding router)", ["client"])
        self.every_s = every_s
        self._next_update = 0.0
        self._clients: set[str] = set()
        self._global_clients: set[str] = set()

    def maybe_update(self, router, unrouted: int) -> None:
        now = time.monotonic()
        if now >= self._next_update:
            self._next_update = now + self.every_s
            self.update(router.snapshot(), unrouted, late_binding=router.holds_requests)

    def update(self, state: RouterSnapshot, unrouted: int, late_binding: bool = False) -> None:
        values = {"router_inflight_requests": state.inflight, "router_worker_alive": [int(a) for a in state.alive]}
        if state.cached_tokens is not None:
            values["router_cached_tokens"] = state.cached_tokens
        for name, per_rank in values.items():
            for rank, value in enumerate(per_rank):
                self.per_worker[name].labels(str(rank)).set(value)
        for client in self._clients - state.deficits.keys():
            for rank in range(len(state.inflight)):
                try:
                    self.deficit.remove(client, str(rank))
                except KeyError:
                    pass
        for client, per_rank in state.deficits.items():
            for rank, value in enumerate(per_rank):
                self.deficit.labels(client, str(rank)).set(value)
        self._clients = set(state.deficits)
        self.unrouted.set(unrouted)
        if late_binding:
            self._update_late_binding(state)

    def _update_late_binding(self, state: RouterSnapshot) -> None:
        self.held.set(state.held_requests)
        for client in self._global_clients - state.client_deficits.keys():
            try:
                self.global_deficit.remove(client)
            except KeyError:
                pass
        for client, value in state.client_deficits.items():
            self.global_deficit.labels(client).set(value)
        self._global_clients = set(state.client_deficits)
