from __future__ import annotations

import pytest

from sglang_fair.router import make_router

PREFIX = list(range(200))


def test_exploits_a_long_cached_prefix() -> None:
    r = make_router("preble", 3)
    w = r.route("a", "c", PREFIX + [1000], 10)
    assert r.route("b", "c", PREFIX + [1001], 10) == w  # cached 200 > uncached 1


def test_explores_when_the_cached_part_is_short() -> None:
    r = make_router("preble", 2)
    w = r.route("a", "c", PREFIX[:10] + list(range(5000, 5100)), 10)
    # 10 cached < 100 uncached: lowest cost, i.e. the empty worker.
    assert r.route("b", "c", PREFIX[:10] + list(range(6000, 6100)), 10) == 1 - w


def test_rebalances_away_from_an_overloaded_holder() -> None:
    r = make_router("preble", 2, rebalance_ratio=1.5, rebalance_min_work=230)
    w = r.route("a", "c", PREFIX, 10)  # load 200 prefill + 20 decode = 220
    assert r.route("b", "c", PREFIX + [1], 10) == w  # 220 <= 230 above the idle worker: exploit
    # Now 220 + 21 > 1.5 x 0 and more than 230 above it: go to the lightest.
    assert r.route("y", "c", PREFIX + [99], 10) == 1 - w


def test_completion_removes_its_load_and_worker_down() -> None:
    r = make_router("preble", 2)
    r.route("a", "c", PREFIX, 10)
    r.on_finish("a", 0, 10)
    assert r.load == [0.0, 0.0]
    r.route("b", "c", PREFIX, 10)
    r.on_worker_down(0)
    assert r.load[0] == 0.0 and r.route("c", "c", PREFIX, 10) == 1


@pytest.mark.parametrize("opts", [{"rebalance_ratio": 0.5}, {"prefill_cost": -1}, {"rebalance_min_work": -1}])
def test_bad_options(opts) -> None:
    with pytest.raises(ValueError):
        make_router("preble", 2, **opts)
