"""Round-robin and per-client round-robin (distributed VTC, DLPM paper Appendix A.3)."""

from __future__ import annotations

import pytest

from tests.router.router_cluster import ClientSpec, max_interval_gap, run_cluster
from sglang_fair.router import NoLiveWorkerError, make_router


def test_round_robin_cycles_and_skips_dead_workers() -> None:
    r = make_router("round_robin", 3)
    assert [r.route(f"a{i}", "c", [1], 1) for i in range(4)] == [0, 1, 2, 0]
    lost = r.on_worker_down(1)
    assert lost == ["a1"]
    assert [r.route(f"b{i}", "c", [1], 1) for i in range(4)] == [2, 0, 2, 0]
    r.on_worker_down(0)
    r.on_worker_down(2)
    with pytest.raises(NoLiveWorkerError):
        r.route("x", "c", [1], 1)


def test_per_client_round_robin_rotates_each_client_over_all_workers() -> None:
    r = make_router("per_client_round_robin", 3)
    a = [r.route(f"a{i}", "alice", [1], 1) for i in range(6)]
    b = [r.route(f"b{i}", "bob", [1], 1) for i in range(3)]
    assert sorted(a[:3]) == [0, 1, 2] and a[:3] == a[3:]
    assert sorted(b) == [0, 1, 2]
    assert b[0] != a[0]  # clients start on different workers
    r.on_worker_down(a[0])
    assert a[0] not in [r.route(f"c{i}", "alice", [1], 1) for i in range(4)]


def test_per_client_round_robin_is_fair_for_backlogged_clients() -> None:
    clients = [ClientSpec("f", 1, 96, (1, 16), (4, 32)), ClientSpec("g", None, 0, (32, 112), (4, 32))]
    cum = run_cluster(make_router("per_client_round_robin", 4), clients, steps=800)
    assert 0.8 < cum["f"][-1] / cum["g"][-1] < 1.25
    assert max_interval_gap(cum["f"], cum["g"]) < 0.1 * cum["f"][-1]
