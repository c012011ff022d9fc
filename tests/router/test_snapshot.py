"""Router.snapshot(): the state operators watch, as a copy."""

from __future__ import annotations

import pytest

from sglang_fair.router import ROUTERS, make_router


@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_snapshot_is_a_copy_of_the_routers_state(name: str) -> None:
    router = make_router(name, 3)
    for i in range(6):
        router.route(f"r{i}", f"c{i % 2}", [i % 3] * 50 + [i], 4)
    router.on_finish("r0", router.inflight["r0"].worker, 4)
    state = router.snapshot()
    assert state.inflight == router.queue_sizes
    # A late-binding router holds what no worker has room for yet.
    assert sum(state.inflight) + state.held_requests == 5
    assert state.held_requests == 0 or router.holds_requests
    assert state.alive == [True, True, True]
    if router.index is not None:
        assert state.cached_tokens == router.index.worker_tokens and sum(state.cached_tokens) > 0
    else:
        assert state.cached_tokens is None
    if name == "d2lpm":
        assert state.deficits == router.deficits and set(state.deficits) == {"c0", "c1"}
        state.deficits["c0"][0] = 1e9
        assert router.deficits["c0"][0] != 1e9
    else:
        assert state.deficits == {}
    if name in ("d2lpm_global", "gie"):  # a counter per client, held or not
        assert set(state.client_deficits) == {"c0", "c1"}
        state.client_deficits["c0"] = 1e9
        assert router.snapshot().client_deficits["c0"] != 1e9
    state.inflight[0] += 100
    assert router.queue_sizes[0] != state.inflight[0]
