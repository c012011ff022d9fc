"""The SGLang model gateway's cache_aware rule."""

from __future__ import annotations

import pytest

from sglang_fair.router import make_router

PREFIX = list(range(100))


def test_high_match_rate_goes_to_the_holder() -> None:
    r = make_router("cache_aware", 2)
    w = r.route("a", "c", PREFIX, 1)
    assert r.route("b", "c", PREFIX + [1, 2], 1) == w  # match 100/102 > 0.3


def test_low_match_rate_goes_to_the_smallest_tree() -> None:
    r = make_router("cache_aware", 2)
    w = r.route("a", "c", PREFIX, 1)
    # 10/110 < 0.3: the worker with fewer cached tokens (the other one).
    assert r.route("b", "c", PREFIX[:10] + list(range(500, 600)), 1) == 1 - w


def test_imbalance_falls_back_to_shortest_queue() -> None:
    r = make_router("cache_aware", 2, balance_abs_threshold=3, balance_rel_threshold=1.5)
    w = r.route("a", "c", PREFIX, 1)
    for i in range(3):
        assert r.route(f"x{i}", "c", PREFIX + [i], 1) == w
    assert r.queue_sizes[w] == 4
    # max - min = 4 > 3 and 4 > 1.5 * 0: shortest queue despite the match.
    assert r.route("y", "c", PREFIX + [77], 1) == 1 - w


def test_ignores_kv_feedback_like_the_gateway() -> None:
    r = make_router("cache_aware", 2)
    w = r.route("a", "c", PREFIX, 1)
    r.on_evicted(w, PREFIX[:1])
    assert r.route("b", "c", PREFIX + [3], 1) == w


@pytest.mark.parametrize("opts", [{"cache_threshold": 1.5}, {"balance_rel_threshold": 0.5}])
def test_bad_options(opts) -> None:
    with pytest.raises(ValueError):
        make_router("cache_aware", 2, **opts)
