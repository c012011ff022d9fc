"""Prometheus gauges of the data-parallel router, exported with SGLang's metrics (``--enable-metrics``).

Refreshed at most once a second from ``Router.snapshot()``; labelled
``dp_rank`` (the worker) and, for per-client state, ``client``:

* ``sglang_fair_router_inflight_requests``: dispatched and not yet finished;
  the queue size the router balances on (it only falls when completions
  arrive over the side channel);
* ``sglang_fair_router_worker_alive``: 1, or 0 once the worker died;
* ``sglang_fair_router_cached_tokens``: tokens the global prefix index
  believes the worker caches (routers with an index);
* ``sglang_fair_router_client_deficit``: D²LPM's deficit q_{i,w} of each
  client on each worker;
* ``sglang_fair_router_unrouted_requests``: requests placed on a random live
  worker, untracked, because the router raised.

Routers that hold requests (``d2lpm_global``) add:

* ``sglang_fair_router_held_requests``: requests waiting in the router for a
  worker with room;
* ``sglang_fair_router_client_global_deficit``: the one cluster-wide deficit
  counter of each client (labelled ``client``);
* ``sglang_fair_router_client_held_requests``: each client's requests held
  in the router, labelled ``reason``: ``no room`` (every local queue full),
  ``deficit`` (its counter spent) or ``passed over`` (others went first);
  0 for every reason a client the router knows is not held for.

The per-client series are written whole on each refresh to a multiprocess
file of their own (``common/metrics_files.py``), so a client the router forgot
(idle) leaves ``/metrics`` and memory; at most ``SGLANG_FAIR_METRICS_MAX_CLIENTS``
clients are exported, the most negative deficits (the most served) first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from sglang_fair.binding.common.metrics_files import SeriesFile
from sglang_fair.binding.common.settings import max_metrics_clients
from sglang_fair.router.base import HOLD_REASONS, RouterSnapshot

_PER_WORKER = {
    "router_inflight_requests": "Requests dispatched to the worker and not finished",
    "router_worker_alive": "1 while the worker is alive, 0 once it died",
    "router_cached_tokens": "Tokens the router's prefix index believes the worker caches",
}


_DEFICIT = "sglang_fair_router_client_deficit"
_DEFICIT_HELP = "D2LPM deficit of a client on a worker"
_GLOBAL_DEFICIT = "sglang_fair_router_client_global_deficit"
_GLOBAL_DEFICIT_HELP = "Cluster-wide deficit of a client (late-binding router)"
_HELD = "sglang_fair_router_client_held_requests"
_HELD_HELP = "A client's requests held in the router, by why they wait (late-binding router)"


class RouterMetrics:
    def __init__(self, every_s: float = 1.0, registry=None, directory: str | None = None,
                 max_clients: int | None = None) -> None:
        import prometheus_client  # after SGLang set PROMETHEUS_MULTIPROC_DIR

        registry = registry or prometheus_client.REGISTRY

        def gauge(name: str, doc: str, labels: list[str]):
            return prometheus_client.Gauge(f"sglang_fair_{name}", doc, labels, registry=registry,
                                           multiprocess_mode="mostrecent")

        self.per_worker = {name: gauge(name, doc, ["dp_rank"]) for name, doc in _PER_WORKER.items()}
        self.unrouted = gauge("router_unrouted_requests", "Requests placed untracked after a router error", [])
        self.held = gauge("router_held_requests", "Requests waiting in the router for a worker with room", [])
        self.clients = SeriesFile(directory, "sglangfair-router")
        self.max_clients = max_clients if max_clients is not None else max_metrics_clients()
        self.every_s = every_s
        self._next_update = 0.0

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
        self.unrouted.set(unrouted)
        if late_binding:
            self.held.set(state.held_requests)
        self.clients.write(self._client_samples(state, late_binding))

    def _client_samples(self, state: RouterSnapshot, late_binding: bool) -> Iterator[tuple]:
        def most_served(deficits: dict, lowest) -> list[str]:
            return sorted(deficits, key=lambda c: (lowest(deficits[c]), c))[:self.max_clients]

        for client in most_served(state.deficits, min):
            for rank, value in enumerate(state.deficits[client]):
                labels = {"client": client, "dp_rank": str(rank)}
                yield _DEFICIT, _DEFICIT, labels, _DEFICIT_HELP, value
        if late_binding:
            for client in most_served(state.client_deficits, float):
                yield (_GLOBAL_DEFICIT, _GLOBAL_DEFICIT, {"client": client}, _GLOBAL_DEFICIT_HELP,
                       state.client_deficits[client])
            # Every known client, every reason, 0 when none: a series drops to 0 rather than vanishing.
            known = state.client_deficits.keys() | state.held_by_client.keys()
            held = {c: sum(state.held_by_client.get(c, {}).values()) for c in known}
            for client in most_served(held, lambda n: -n):  # the most held first
                reasons = state.held_by_client.get(client, {})
                for why in HOLD_REASONS:
                    yield _HELD, _HELD, {"client": client, "reason": why}, _HELD_HELP, reasons.get(why, 0)
