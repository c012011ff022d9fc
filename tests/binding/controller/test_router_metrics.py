"""The router's Prometheus gauges, read back as /metrics reads them: per-worker gauges from
a registry of their own, per-client series from their multiprocess file (a temporary directory)."""

from __future__ import annotations

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client import multiprocess  # noqa: E402

from sglang_fair.binding.controller.router_metrics import RouterMetrics  # noqa: E402
from sglang_fair.router import make_router  # noqa: E402


def _reader(registry, directory):
    def value(name: str, **labels) -> float | None:
        found = registry.get_sample_value(f"sglang_fair_{name}", labels)
        if found is None:
            files = prometheus_client.CollectorRegistry()
            multiprocess.MultiProcessCollector(files, path=str(directory))
            found = files.get_sample_value(f"sglang_fair_{name}", labels)
        return found

    return value


def test_gauges_follow_the_router_and_drop_forgotten_clients(tmp_path) -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics = RouterMetrics(registry=registry, directory=str(tmp_path))
    router = make_router("d2lpm", 2, quantum=1000)
    router.route("a1", "alice", list(range(300)), 8)
    router.route("b1", "bob", list(range(500, 600)), 8)
    value = _reader(registry, tmp_path)

    metrics.update(router.snapshot(), unrouted=3)
    assert [value("router_inflight_requests", dp_rank=str(w)) for w in (0, 1)] == router.queue_sizes
    assert sum(value("router_cached_tokens", dp_rank=str(w)) for w in (0, 1)) == 400
    alice = router.deficits["alice"]
    assert [value("router_client_deficit", client="alice", dp_rank=str(w)) for w in (0, 1)] == alice
    assert value("router_unrouted_requests") == 3
    router.on_worker_down(1)
    router.forget_client("bob")
    metrics.update(router.snapshot(), unrouted=3)
    assert value("router_worker_alive", dp_rank="1") == 0 and value("router_worker_alive", dp_rank="0") == 1
    assert value("router_client_deficit", client="bob", dp_rank="0") is None


def test_refresh_is_rate_limited(tmp_path) -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics = RouterMetrics(every_s=3600, registry=registry, directory=str(tmp_path))
    router = make_router("round_robin", 2)
    metrics.maybe_update(router, 0)
    router.route("a", "c", [1, 2, 3], 4)
    metrics.maybe_update(router, 0)  # within the hour: not refreshed
    assert registry.get_sample_value("sglang_fair_router_inflight_requests", {"dp_rank": "0"}) == 0
    assert registry.get_sample_value("sglang_fair_router_cached_tokens", {"dp_rank": "0"}) is None  # no index


def test_a_holding_router_exports_held_requests_and_cluster_deficits(tmp_path) -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics = RouterMetrics(every_s=0, registry=registry, directory=str(tmp_path))
    router = make_router("d2lpm_global", 2, local_queue_requests=1)
    for i in range(3):
        router.route(f"a{i}", "alice", list(range(100 * i, 100 * i + 20)), 8)
    router.route("b0", "bob", list(range(900, 920)), 8)
    metrics.maybe_update(router, 0)
    value = _reader(registry, tmp_path)

    state = router.snapshot()
    assert value("router_held_requests") == state.held_requests == 2
    assert value("router_client_global_deficit", client="alice") == state.client_deficits["alice"]
    assert value("router_client_global_deficit", client="bob") == state.client_deficits["bob"]
    held = {c: value("router_client_held_requests", client=c, reason="no room") for c in ("alice", "bob")}
    assert held == {"alice": 1, "bob": 1} == {c: r["no room"] for c, r in state.held_by_client.items()}
    # The other reasons read 0 (a dashboard sees a series fall to 0 rather than vanish).
    assert value("router_client_held_requests", client="alice", reason="deficit") == 0
    assert router.cancel("b0")
    router.clock = lambda: 1e9  # bob has been idle for ever: the router forgets him
    router.fair.collect_idle()
    metrics.maybe_update(router, 0)
    assert value("router_held_requests") == 1
    assert value("router_client_global_deficit", client="bob") is None
    assert value("router_client_held_requests", client="bob", reason="no room") is None


def test_per_client_series_are_capped_most_served_first(tmp_path) -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics = RouterMetrics(every_s=0, registry=registry, directory=str(tmp_path), max_clients=2)
    router = make_router("d2lpm", 2, quantum=1000)
    for i, client in enumerate(["a", "b", "c"]):
        for j in range(i + 1):
            router.route(f"{client}{j}", client, list(range(1000 * i + 100 * j, 1000 * i + 100 * j + 50)), 8)
    state = router.snapshot()
    metrics.update(state, unrouted=0)
    value = _reader(registry, tmp_path)
    shown = {c for c in "abc" if value("router_client_deficit", client=c, dp_rank="0") is not None}
    assert shown == set(sorted("abc", key=lambda c: (min(state.deficits[c]), c))[:2])
