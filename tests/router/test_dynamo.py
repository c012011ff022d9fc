"""The Dynamo style router: its policy queue (when to queue, weighted DRR) and its KV-overlap worker cost."""

from __future__ import annotations

import pytest

from sglang_fair.router import make_router
from sglang_fair.router.dynamo import DeficitRoundRobin
from sglang_fair.router.held import Held, HeldQueues
from sglang_fair.router.radix_index import RadixIndex

PREFIX = list(range(1000, 1256))  # four 64-token blocks


def _prompt(i: int, n: int = 100) -> list[int]:
    return [50_000 + i * 1000 + k for k in range(n)]


def _busy_router(**options):
    """One worker, busy past 100 active prefill tokens."""
    return make_router("dynamo", 1, worker_batched_tokens=100, queue_threshold=1.0, **options)


def test_placed_at_once_and_uncharged_while_a_worker_is_not_busy() -> None:
    r = make_router("dynamo", 2)
    assert r.route("a", "c", _prompt(1), 8) is not None
    assert r.route("b", "c", _prompt(2), 8) is not None
    assert r.drr.deficits == {} and r.snapshot().held_requests == 0


def test_queues_while_every_worker_is_busy_and_releases_after_a_first_token() -> None:
    r = _busy_router()
    assert r.route("a", "c", _prompt(1, 150), 8) == 0  # 150 active prefill tokens > 1.0 x 100: busy
    assert r.route("b", "c", _prompt(2), 8) is None
    r.on_admitted("a", 0)
    assert r.take_released() == []  # admitted, still prefilling
    r.on_progress("a", 0, 1)  # its prefill is over
    assert r.take_released() == [("b", 0)]


def test_queued_requests_of_one_client_go_in_arrival_order() -> None:
    r = _busy_router()
    r.route("a", "c", _prompt(1, 150), 8)
    for rid in ("x", "y", "z"):
        assert r.route(rid, "c", _prompt(ord(rid)), 8) is None
    order, running = [], ["a"]
    while running:
        rid = running.pop(0)
        r.on_progress(rid, 0, 1)
        placed = [p for p, _ in r.take_released()]
        running += placed
        order += placed
    assert order == ["x", "y", "z"]


def test_drr_shares_dispatches_by_uncached_tokens() -> None:
    r = _busy_router(quantum=100)
    r.route("first", "z", _prompt(0, 150), 8)
    for i in range(8):
        r.route(f"cheap{i}", "cheap", _prompt(10 + i, 100), 8)
        r.route(f"dear{i}", "dear", _prompt(30 + i, 400), 8)
    order, running = [], ["first"]
    while len(order) < 10:
        rid = running.pop(0)
        r.on_admitted(rid, 0)
        r.on_progress(rid, 0, 1)
        placed = [p for p, _ in r.take_released()]
        running += placed
        order += placed
    # Per round cheap earns 100 (one request), dear 100 (a quarter of one): four cheap per dear.
    assert order[:10].count("dear0") + order[:10].count("dear1") == 2
    assert sum(p.startswith("cheap") for p in order[:10]) == 8


def test_an_emptied_class_drops_its_deficit_and_the_cursor_advances() -> None:
    drr = DeficitRoundRobin(100, {})
    queues = HeldQueues()
    index = RadixIndex(1)
    for i, (client, cost) in enumerate((("a", 50), ("a", 50), ("b", 30))):
        held = Held(f"{client}{i}", client, [i], 1, i, index.match([i]), cost=cost)
        queues.add(held)
        drr.backlogged(client)
    held = queues.head(drr.pick(queues))
    assert held.rid == "a0" and drr.deficits["a"] == 100
    queues.remove(held.rid)
    drr.dispatched(held, queues)
    assert drr.deficits["a"] == 50 and drr.ring[0] == "a"  # the next head is affordable: stay
    held = queues.head(drr.pick(queues))
    queues.remove(held.rid)
    drr.dispatched(held, queues)
    assert "a" not in drr.deficits and list(drr.ring) == ["b"]


def test_weights_scale_the_quantum() -> None:
    drr = DeficitRoundRobin(100, {"w": 3.0})
    assert drr._quantum("w") == 300 and drr._quantum("other") == 100


def test_the_worker_cost_prefers_cached_blocks_and_spreads_active_ones() -> None:
    r = make_router("dynamo", 2)
    w = r.route("a", "c", PREFIX + _prompt(1, 10), 8)
    # Still prefilling, its 266 tokens count on w: (266 + 266 - 256) / 64 + 4 active blocks > 266 / 64 + 4.
    assert r.route("b", "c", PREFIX + _prompt(2, 10), 8) == 1 - w
    r.on_progress("a", w, 1)
    # Prefilled: 4 prefill blocks fewer there, and its blocks are active there already.
    assert r.route("d", "c", PREFIX + _prompt(4, 10), 8) == w
    # Nothing shared: the worker with less prefill in flight ("b" still prefills on the other one).
    assert r.route("x", "c", _prompt(3, 300), 8) == w


def test_completion_frees_active_blocks_and_prefill_tokens() -> None:
    r = make_router("dynamo", 1)
    r.route("a", "c", PREFIX, 8)
    assert len(r._active[0]) == 4 and r.placements.prefill_tokens[0] == 256
    r.on_finish("a", 0, 8)
    assert r._active[0] == {} and r.placements.prefill_tokens[0] == 0


@pytest.mark.parametrize("options, message", [
    ({"quantum": 0}, "quantum must be a positive integer"),
    ({"queue_threshold": -1}, "queue_threshold must be a non-negative"),
    ({"worker_batched_tokens": 1.5}, "worker_batched_tokens must be a positive integer"),
    ({"overlap_score_weight": float("nan")}, "overlap_score_weight must be a non-negative finite"),
])
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_router("dynamo", 2, **options)
