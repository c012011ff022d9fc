from __future__ import annotations

from sglang_fair.router import make_router


def test_goes_to_fewest_in_flight_and_follows_completions() -> None:
    r = make_router("shortest_queue", 3)
    assert [r.route(f"a{i}", "c", [1], 1) for i in range(3)] == [0, 1, 2]
    r.on_finish("a1", 1, 3)
    assert r.route("b", "c", [1], 1) == 1
    assert r.queue_sizes == [1, 1, 1]
    r.on_worker_down(0)
    assert r.route("d", "c", [1], 1) in (1, 2)
    assert r.queue_sizes[0] == 0
