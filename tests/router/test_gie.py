"""The GIE / llm-d style router: flow control (fairness policies, saturation), then the scorers."""

from __future__ import annotations

import pytest

from sglang_fair.router import make_router
from sglang_fair.router.flow_fairness import VirtualTokenCounter
from sglang_fair.router.held import Held, HeldQueues
from sglang_fair.router.radix_index import RadixIndex

PREFIX = list(range(1000, 1256))  # four 64-token blocks


def _prompt(i: int, n: int = 20) -> list[int]:
    return [50_000 + i * 100 + k for k in range(n)]


def _admit_in_turn(r, first: str, times: int) -> list[str]:
    """Admit the oldest request waiting on worker 0 ``times`` times: the order the held ones went in."""
    waiting, order = [first], []
    for _ in range(times):
        r.on_admitted(waiting.pop(0), 0)
        placed = [rid for rid, _ in r.take_released()]
        waiting += placed
        order += placed
    return order


def test_dispatches_while_the_mean_waiting_queue_is_under_the_threshold() -> None:
    r = make_router("gie", 2, queue_depth_threshold=5)
    placed = [r.route(f"f{i}", "flood", _prompt(i), 8) for i in range(14)]
    # Mean of waiting / 5 over two workers reaches 1.0 at ten requests waiting: the rest are held.
    assert sum(w is not None for w in placed) == 10 and r.snapshot().held_requests == 4
    assert r.saturation() == 1.0
    rid, d = next(iter(r.inflight.items()))
    r.on_admitted(rid, d.worker)  # one leaves a waiting queue: one held request goes
    assert [p for p, _ in r.take_released()] == ["f10"] and r.snapshot().held_requests == 3


def test_kv_use_saturates_when_the_workers_pool_is_known() -> None:
    r = make_router("gie", 1, worker_kv_tokens=1000, queue_depth_threshold=100)
    assert r.route("a", "c", _prompt(1, 400), 8) == 0
    r.on_admitted("a", 0, cached_tokens=0)
    r.on_progress("a", 0, 400)  # 800 tokens in use: 0.8 of the pool, the threshold
    assert r.saturation() == pytest.approx(1.0)
    assert r.route("b", "c", _prompt(2), 8) is None
    r.on_finish("a", 0, 400)
    assert r.take_released() == [("b", 0)]


def test_vtc_serves_the_client_with_the_smallest_counter_and_charges_prompt_size_over_weight() -> None:
    r = make_router("gie", 1, queue_depth_threshold=1, client_weights={"heavy": 2.0})
    r.route("h0", "heavy", _prompt(0, 400), 8)  # dispatched at once: heavy's counter 400 / 2 = 200
    for i in range(1, 4):
        r.route(f"h{i}", "heavy", _prompt(i, 400), 8)
    r.route("l0", "light", _prompt(9, 100), 8)  # starts at the smallest counter kept: 200, ties by id
    r.route("l1", "light", _prompt(10, 100), 8)
    # A tie at 200 goes to "heavy" by id (-> 400); light 200 and 300 go next; then heavy 400 before
    # light 400 (tie), heavy 600 ...
    assert _admit_in_turn(r, "h0", 5) == ["h1", "l0", "l1", "h2", "h3"]
    assert r.fairness.counters == {"heavy": 800.0, "light": 400.0}


def test_a_new_client_starts_at_the_smallest_counter_of_any_client_kept() -> None:
    vtc = VirtualTokenCounter({})
    vtc.counters = {"idle": 10.0, "busy": 500.0}
    queues = HeldQueues()
    index = RadixIndex(1)
    for rid, client in (("b", "busy"), ("n", "new")):
        queues.add(Held(rid, client, [1, 2], 4, 0, index.match([1, 2])))
    assert vtc.pick(queues) == "new" and vtc.counters["new"] == 10.0  # the idle client's counter counts


@pytest.mark.parametrize("fairness, expected", [("round_robin", ["b0", "c0", "a1", "b1", "a2"]),
                                                ("global_strict", ["b0", "a1", "c0", "b1", "a2"])])
def test_round_robin_and_global_strict(fairness: str, expected: list[str]) -> None:
    r = make_router("gie", 1, fairness=fairness, queue_depth_threshold=1)
    r.route("a0", "a", _prompt(0), 8)  # dispatched at once (round-robin: "a" served last)
    for i, (rid, client) in enumerate((("b0", "b"), ("a1", "a"), ("c0", "c"), ("b1", "b"), ("a2", "a"))):
        assert r.route(rid, client, _prompt(i + 1), 8) is None
    assert _admit_in_turn(r, "a0", 5) == expected


def test_prefix_score_outweighs_a_longer_queue_and_queue_score_balances_the_rest() -> None:
    r = make_router("gie", 2, queue_depth_threshold=50)
    w = r.route("p0", "c", PREFIX + [1], 8)
    # 3 x 4/5 blocks cached (2.4) beats 2 x (1 - 0) queue points of the empty worker.
    assert r.route("p1", "c", PREFIX + [2], 8) == w
    assert r.route("p2", "c", PREFIX + [3], 8) == w
    # No prefix anywhere: the shorter waiting queue wins.
    assert r.route("x", "c", _prompt(3), 8) == 1 - w


def test_ties_are_broken_by_the_seeded_generator() -> None:
    picks = {seed: [make_router("gie", 4, seed=seed).route("a", "c", _prompt(1), 8) for _ in range(3)]
             for seed in (0, 1, 2, 3, 4, 5)}
    assert all(len(set(p)) == 1 for p in picks.values())  # same seed, same choice
    assert len({p[0] for p in picks.values()}) > 1  # not always the lowest index


def test_cancel_and_worker_death() -> None:
    r = make_router("gie", 2, queue_depth_threshold=1)
    r.route("a", "c", _prompt(1), 8)
    r.route("b", "c", _prompt(2), 8)
    assert r.route("c", "c", _prompt(3), 8) is None
    assert r.cancel("c") and not r.cancel("c") and not r.cancel("a")
    r.route("d", "c", _prompt(4), 8)
    lost = r.on_worker_down(r.inflight["a"].worker)
    assert "a" in lost
    lost = r.on_worker_down(r.inflight["b"].worker)
    assert "d" in lost and r.snapshot().held_requests == 0  # nobody left: held requests handed back


@pytest.mark.parametrize("options, message", [
    ({"fairness": "lottery"}, "fairness must be one of"),
    ({"queue_depth_threshold": 0}, "queue_depth_threshold must be a positive integer"),
    ({"kv_cache_util_threshold": 1.5}, r"kv_cache_util_threshold must be a number in \(0, 1\]"),
    ({"prefix_weight": -1}, "prefix_weight must be a non-negative"),
    ({"client_weights": {"a": 0}}, "must be a positive finite number"),
    ({"worker_kv_tokens": True}, "worker_kv_tokens must be a positive integer"),
])
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_router("gie", 2, **options)
