"""d2lpm_global: late binding, one cluster-wide DLPM, and the global service bound."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest

from sglang_fair.router import make_router
from sglang_fair.router.global_dlpm import GlobalDLPMRouter
from sglang_fair.router.global_dlpm.locality import OverShare
from sglang_fair.router.global_dlpm.order import _in_room as in_room
from sglang_fair.router.global_dlpm.placement import PlacementPass
from tests.router.router_cluster import ClientSpec, max_backlogged_gap, run_cluster

W_E, W_Q = 1.0, 2.0
KEY = 16  # look-alikes share this many first tokens
BATCH = 4


def _router(workers: int = 2, **options) -> GlobalDLPMRouter:
    router = make_router("d2lpm_global", workers, **options)
    assert isinstance(router, GlobalDLPMRouter)
    return router


# ---- mechanics ---------------------------------------------------------------------


def test_requests_wait_in_the_router_until_a_worker_has_room() -> None:
    r = _router(2, local_queue_requests=1)
    assert r.route("a", "x", [1, 2, 3], 4) == 0
    assert r.route("b", "x", [7, 8], 4) == 1
    assert r.route("c", "x", [5, 6], 4) is None  # both local queues are full
    assert r.snapshot().held_requests == 1
    assert r.take_released() == []
    r.on_admitted("b", 1)  # worker 1's queue has room again
    assert r.take_released() == [("c", 1)]
    assert r.snapshot().held_requests == 0


def test_a_full_local_queue_keeps_one_place_for_a_client_with_nothing_dispatched() -> None:
    # Q = 4: x's two dispatches (3 + 2 input tokens) spend its deficit, so y's arrival finds
    # nothing blocking the refill (a newcomer still waits for DLPM's order, only not for room).
    r = _router(2, quantum=4.0, local_queue_requests=1, reserve_for_newcomers=True)
    assert r.route("a", "x", [1, 2, 3], 4) == 0
    assert r.route("b", "x", [7, 8], 4) == 1
    assert r.route("c", "x", [5, 6], 4) is None  # x has requests dispatched: no kept place for it
    worker = r.route("d", "y", [9, 10], 4)
    assert worker in (0, 1)  # y had nothing dispatched: it takes the kept place at once
    assert r.route("e", "y", [11, 12], 4) is None  # now it has
    assert len(r.queues.local[worker]) == r.options.local_queue_requests + 1
    assert r.queues.newcomer_rooms() == [1 - worker]  # one kept place per worker


def test_the_placement_loops_room_lists_follow_each_workers_queue() -> None:
    # rooms() and newcomer_rooms() read every worker in one pass; worker by worker, whatever the queues
    # hold, they must name those under the request limit and the token cap (the kept place: at the
    # limit, whatever the tokens), and never a dead worker.
    rng = random.Random(7)
    r = _router(4, local_queue_requests=2, local_queue_tokens=10, worker_max_running=3, reserve_for_newcomers=True)
    seen = {"room": 0, "none": 0, "full by count": 0, "full by tokens": 0, "at the token cap": 0}
    for i in range(400):
        action = rng.random()
        if i == 150:
            r.on_worker_down(3)
        elif action < 0.4:
            client = f"c{rng.randrange(5)}"
            r.route(f"r{i}", client, [rng.randrange(50) for _ in range(rng.choice((1, 2, 8, 9, 12)))], 8)
        elif action < 0.75 and r.inflight:
            rid = rng.choice(sorted(r.inflight))
            r.on_admitted(rid, r.inflight[rid].worker, 0)
        elif r.inflight:
            rid = rng.choice(sorted(r.inflight))
            r.on_finish(rid, r.inflight[rid].worker, 8)
        r.take_released()
        q = r.queues
        live = [w for w in range(4) if q.alive[w]]
        assert q.rooms() == [w for w in live if len(q.local[w]) < q.limit(w) and q.tokens[w] < 10]
        assert q.newcomer_rooms() == [w for w in live if len(q.local[w]) <= q.limit(w)]
        assert i < 150 or all(d.worker != 3 for d in r.inflight.values())
        seen["room" if q.rooms() else "none"] += 1
        seen["full by count"] += any(len(q.local[w]) == q.limit(w) for w in range(3))
        seen["full by tokens"] += any(len(q.local[w]) < q.limit(w) and q.tokens[w] >= 10 for w in range(3))
        seen["at the token cap"] += any(len(q.local[w]) < q.limit(w) and q.tokens[w] == 10 for w in range(3))
    assert all(seen.values()), seen  # each case was checked


def test_a_newcomer_beside_a_flood_with_credit_takes_the_kept_place_at_once() -> None:
    # x keeps a positive deficit (Q = 10,000), so no refill can come: at 0, y would wait for x
    # to spend it; starting with one quantum, as under --fair-isolation, it goes at once.
    r = _router(1, quantum=10_000.0, local_queue_requests=1, reserve_for_newcomers=True)
    for i in range(3):
        r.route(f"x{i}", "x", list(range(100 * i, 100 * i + 20)), 8)
    assert r.route("y0", "y", list(range(900, 920)), 8) == 0
    assert r.fair.policy.deficits["y"] == 10_000.0 - 20
    assert r.snapshot().held_by_client == {"x": {"no room": 2}}


def test_a_newcomer_out_of_deficit_is_held_for_its_deficit_not_for_room() -> None:
    r = _router(1, quantum=100.0, local_queue_requests=1, reserve_for_newcomers=True)
    assert r.route("x0", "x", list(range(20)), 8) == 0
    assert r.route("x1", "x", list(range(100, 120)), 8) is None
    assert r.route("y0", "y", list(range(900, 1050)), 8) == 0  # the kept place; y's deficit 100 - 150
    r.on_admitted("y0", 0)
    r.on_finish("y0", 0, 0)
    # The kept place is free again and y has nothing dispatched, but x (positive) blocks the refill.
    assert r.route("y1", "y", list(range(2000, 2010)), 8) is None
    assert r.hold_reasons() == {"x1": "no room", "y1": "deficit"}
    assert r.snapshot().held_by_client == {"x": {"no room": 1}, "y": {"deficit": 1}}


class _Observer:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def routed(self, rid, client, tokens, cached_anywhere, t):
        self.events.append(("routed", rid, client, tokens, cached_anywhere))

    def dispatched(self, rid, worker, cached_there, t):
        self.events.append(("dispatched", rid, worker, cached_there))

    def pumped(self, held, t):
        self.events.append(("pumped", held))


def test_an_observer_hears_arrivals_placements_and_why_requests_wait() -> None:
    r = _router(2, local_queue_requests=1)
    r.observer = seen = _Observer()
    r.route("a", "x", [1, 2, 3], 4)
    r.route("b", "x", [1, 2, 3, 9], 4)  # 3 of its tokens are cached on worker 0 now
    r.route("c", "x", [5, 6], 4)
    assert seen.events[:3] == [("routed", "a", "x", 3, 0), ("dispatched", "a", 0, 0), ("pumped", {})]
    assert seen.events[3] == ("routed", "b", "x", 4, 3)
    assert seen.events[-1] == ("pumped", {"c": "no room"})  # both local queues are full
    assert r.hold_reasons() == {"c": "no room"}
    r.on_admitted("b", seen.events[4][2])
    assert seen.events[-2][:2] == ("dispatched", "c") and seen.events[-1] == ("pumped", {})


def test_without_the_kept_place_a_newcomer_waits_for_room() -> None:
    r = _router(2, local_queue_requests=1)
    assert r.route("a", "x", [1, 2, 3], 4) == 0
    assert r.route("b", "x", [7, 8], 4) == 1
    assert r.route("d", "y", [9, 10], 4) is None


def test_no_refill_past_a_client_still_waiting_in_a_local_queue() -> None:
    # y arrives at deficit 0 while x, positive, waits in worker 0's local queue:
    # refilling y now would let y overtake x's charge, so y waits for x's admission.
    r = _router(2, local_queue_requests=1)
    assert r.route("a", "x", [1, 2, 3], 4) == 0
    assert r.route("b", "x", [7, 8], 4) == 1
    assert r.route("c", "y", [5, 6], 4) is None
    r.on_admitted("b", 1)
    assert r.take_released() == []  # room on worker 1, but x still waits on worker 0
    r.on_admitted("a", 0)
    assert [rid for rid, _ in r.take_released()] == ["c"]


def test_a_worker_gets_the_waiting_request_with_the_longest_prefix_it_caches() -> None:
    r = _router(2, local_queue_requests=1, affinity_ratio=None)
    shared = list(range(100))
    assert r.route("a", "x", shared + [1], 4) == 0
    assert r.route("b", "x", [500, 501], 4) == 1
    assert r.route("c", "x", [600, 601], 4) is None
    assert r.route("d", "x", shared + [2], 4) is None  # later, but its prefix is cached on worker 0
    r.on_admitted("a", 0)
    assert r.take_released() == [("d", 0)]


def _random_traffic(r: GlobalDLPMRouter, rng: random.Random, clients: int, shortest: int,
                    admit: float) -> Iterator[None]:
    """300 arrivals on ``r`` of prompts of ``shortest``-40 tokens of one stem per worker (so that
    look-alikes share 16 or more) plus a short tail, from ``clients`` clients; after each, a
    placed request admitted and finished with probability ``admit`` (its worker then reporting
    its cache half the time), and a worker evicting part of some prompt's path one time in five.
    Yields after each step, once its removals are marked, as the next placement pass does first."""
    workers = r.num_workers
    stems = [[rng.randrange(5) for _ in range(40)] for _ in range(workers)]
    placed: list[tuple[str, int]] = []
    prompts: dict[str, list[int]] = {}
    for i in range(300):
        stem = stems[rng.randrange(workers)]
        tokens = prompts[f"r{i}"] = (stem[: rng.randint(shortest, 40)]
                                     + [rng.randrange(4) for _ in range(rng.randint(0, 12))])
        w = r.route(f"r{i}", f"c{rng.randrange(clients)}", tokens, 2)
        placed += ([(f"r{i}", w)] if w is not None else []) + r.take_released()
        if placed and rng.random() < admit:
            rid, worker = placed.pop(rng.randrange(len(placed)))
            r.on_admitted(rid, worker)
            r.on_finish(rid, worker, 2)
            if rng.random() < 0.5:
                r.on_cached(worker, prompts[rid] + [rng.randrange(4) for _ in range(4)])
        if rng.random() < 0.2:
            cut = prompts[f"r{rng.randrange(i + 1)}"]
            r.on_evicted(rng.randrange(workers), cut[: rng.randint(1, len(cut))])
        r.held.mark_stale(r.index.take_removals())
        yield


@pytest.mark.parametrize("seed", range(4))
def test_held_requests_rank_by_what_a_fresh_lookup_would_say(seed: int) -> None:
    # Held requests are not looked up again when look-alikes (same first 16
    # tokens) are placed: their per-worker matches are updated by the common
    # prefix. Evictions and the workers' cache reports mark the held requests
    # on their path stale instead. Every held request not so marked must rank
    # by what a new walk of the index says wherever the match reaches 16 tokens
    # (shorter ones count as none), whatever the interleaving.
    rng = random.Random(seed)
    r = _router(3, local_queue_requests=2, affinity_ratio=None)
    marked = 0
    for _ in _random_traffic(r, rng, clients=4, shortest=16, admit=0.5):
        for held in r.held.by_rid.values():
            if held.stale:
                marked += 1
                continue
            fresh = r.index.match(held.tokens)
            assert held.lens == [n if n >= KEY else 0 for n in fresh.cached_lens(3)]
            if fresh.length >= KEY:
                assert (held.length, held.holders) == (fresh.length, fresh.workers)
    assert marked  # evictions did reach held requests


@pytest.mark.parametrize("seed", range(4))
def test_the_kept_rankings_read_as_a_fresh_ranking_of_every_candidate(seed: int) -> None:
    # The workers' lists are kept sorted as candidates come, go, turn stale and gain look-alikes,
    # and several rooms are read lazily; both must give exactly the order, and the rooms, of
    # ranking every candidate afresh (``PlacementPass._ranked``), Preble's rebalance included.
    rng = random.Random(seed)
    r = _router(4, local_queue_requests=2, candidates_per_client=3)
    compared = moved = 0
    for _ in _random_traffic(r, rng, clients=5, shortest=10, admit=0.4):
        r.held.settle(r.index)  # and what it does before it reads the workers' lists
        # the clients a pass may read (those with a positive deficit): here a random subset
        clients = [(client, reqs) for client, reqs in r.held.by_client.items() if rng.random() < 0.7]
        for rooms in ([rng.randrange(4)], sorted(rng.sample(range(4), 2)), [0, 1, 2, 3]):
            placement = PlacementPass(rooms, r.held, r.index, r.locality, r.waits, OverShare(r.fair, True), None)
            assert not placement.bound
            positive = {client for client, _ in clients}
            kept = (in_room(r.held.ranked_for(rooms[0]), rooms[0], positive) if len(rooms) == 1
                    else placement._best_first(positive))
            fast = [(item[-1].rid, item[-1].room, item[:3]) for item in kept]
            fresh = sorted(placement._ranked(clients))
            assert fast == [(item[-1].rid, item[-1].room, item[:3]) for item in fresh]
            compared += len(fast)
            moved += sum(1 for item in fresh if len(rooms) > 1 and -item[0] < max(item[-1].lens[w] for w in rooms))
    assert compared > 1000 and moved  # many candidates, and the rebalance did move some


def test_a_held_request_is_ranked_by_what_workers_hold_after_an_eviction() -> None:
    r = _router(2, local_queue_requests=1, affinity_ratio=None)
    shared = list(range(100))
    assert r.route("a", "x", shared + [1], 4) == 0
    assert r.route("b", "x", [500, 501], 4) == 1
    assert r.route("c", "x", [600, 601], 4) is None
    assert r.route("d", "x", shared + [2], 4) is None  # its prefix is cached on worker 0 ...
    r.on_evicted(0, shared[:11])  # ... until worker 0 keeps only its first 10 tokens
    r.on_admitted("a", 0)
    assert r.take_released() == [("c", 0)]  # nothing cached of d here now: the older request goes


def test_the_local_queue_is_bounded_in_uncached_tokens() -> None:
    r = _router(1, local_queue_tokens=100, local_queue_requests=50)
    assert r.route("a", "x", list(range(60)), 1) == 0
    assert r.route("b", "x", list(range(1000, 1060)), 1) == 0  # 60 < 100: still room
    assert r.route("c", "x", list(range(2000, 2010)), 1) is None  # 120 >= 100
    r.on_admitted("a", 0)
    assert r.take_released() == [("c", 0)]


def test_a_local_queue_holds_few_more_than_its_workers_free_slots() -> None:
    # Requests waiting behind a full batch are pinned to that worker; at a flood's end another
    # worker would sit idle while it drains them.
    r = _router(1, worker_max_running=2, local_queue_requests=8, queue_beyond_free_slots=1,
                wait_for_shared_prefill=False, finishing_tokens=0)  # 4-token requests would all be finishing
    for rid in ("a", "b"):
        assert r.route(rid, "x", [ord(rid), 1, 2], 4) == 0
        r.on_admitted(rid, 0)  # the worker runs 2: its batch is full
    assert r.route("c", "x", [3, 1, 2], 4) == 0  # its one place
    assert r.route("d", "x", [4, 1, 2], 4) is None
    assert r.hold_reasons() == {"d": "no room"}
    r.on_finish("a", 0, 4)  # a slot frees: one more may wait there
    assert r.take_released() == [("d", 0)]
    assert r.route("e", "x", [5, 1, 2], 4) is None


def test_a_batch_admitted_one_report_at_a_time_leaves_few_waiting() -> None:
    # SGLang reports a batch's admissions one by one; were the limit applied only to a full
    # batch, each admission would refill the local queue while slots remain, up to R.
    r = _router(1, worker_max_running=4, local_queue_requests=16, queue_beyond_free_slots=1,
                wait_for_shared_prefill=False, finishing_tokens=0)  # 4-token requests would all be finishing
    for i in range(30):
        r.route(f"x{i}", "x", [i, 1, 2], 4)
    first = list(r.queues.local[0])
    for rid in first[:4]:
        r.on_admitted(rid, 0)
        r.take_released()
    assert r.queue_sizes[0] - len(r.queues.local[0]) == 4 and len(r.queues.local[0]) == 1


def test_without_the_workers_batch_size_the_local_queue_is_r() -> None:
    r = _router(1, local_queue_requests=3, queue_beyond_free_slots=1, wait_for_shared_prefill=False)
    for i in range(3):
        assert r.route(f"a{i}", "x", [i, 1, 2], 4) == 0
        r.on_admitted(f"a{i}", 0)
    assert [r.route(f"b{i}", "x", [i, 3, 4], 4) for i in range(4)] == [0, 0, 0, None]


def test_deficits_gate_dispatch_across_the_cluster() -> None:
    # One local slot per worker; x floods, y sends one request later: y is placed
    # before x's older requests once x has used its quantum.
    r = _router(2, quantum=100, local_queue_requests=1, affinity_ratio=None)
    for i in range(6):
        r.route(f"x{i}", "x", [1000 * i + k for k in range(80)], 1)
    assert r.route("y0", "y", [9000, 9001], 1) is None
    r.on_admitted("x0", 0)
    # Nobody waiting is positive (y starts at 0, x spent 160): both refilled, oldest first.
    assert r.take_released() == [("x2", 0)]
    assert r.fair.policy.deficits == {"x": 100 - 80 - 80 + 100 - 80, "y": 100}
    r.on_admitted("x2", 0)
    assert r.take_released() == [("y0", 0)]  # x is out of deficit while y is not


def test_cancel_withdraws_only_held_requests() -> None:
    r = _router(1, local_queue_requests=1)
    assert r.route("a", "x", [1, 2], 4) == 0
    assert r.route("b", "x", [3, 4], 4) is None
    assert r.cancel("b")
    assert not r.cancel("b")
    assert not r.cancel("a")  # placed: the worker answers it
    r.on_admitted("a", 0)
    assert r.take_released() == []
    assert r.fair.activity["x"].queued == 0


def test_admission_report_corrects_the_charge_to_what_the_worker_computed() -> None:
    r = _router(1, quantum=10_000, wait_for_shared_prefill=False)
    prompt = list(range(1000))
    r.route("a", "x", prompt, 1)
    r.route("b", "x", prompt, 1)  # the index believes worker 0 caches all of it
    charged = 10_000 - r.fair.policy.deficits["x"]
    assert charged == 1000  # a: 1000 uncached, b: 0
    r.on_admitted("b", 0, cached_tokens=0)  # the worker had not cached it yet
    assert 10_000 - r.fair.policy.deficits["x"] == 2000
    r.on_admitted("a", 0, cached_tokens=0)  # as charged: nothing changes
    assert 10_000 - r.fair.policy.deficits["x"] == 2000


def test_outputs_are_charged_once_from_progress_and_finish() -> None:
    r = _router(1, quantum=10_000)
    r.route("a", "x", [1, 2, 3], 10)
    r.on_progress("a", 0, 4)
    r.on_progress("a", 0, 4)
    r.on_finish("a", 0, 10)
    r.on_progress("a", 0, 12)  # late report: ignored
    assert 10_000 - r.fair.policy.deficits["x"] == 3 * W_E + 10 * W_Q


def test_held_requests_are_returned_when_no_worker_is_left() -> None:
    r = _router(2, local_queue_requests=1)
    r.route("a", "x", [1], 1)
    r.route("b", "x", [2], 1)
    assert r.route("c", "x", [3], 1) is None
    assert sorted(r.on_worker_down(0)) == ["a"]
    assert r.take_released() == []
    assert sorted(r.on_worker_down(1)) == ["b", "c"]
    assert not r.cancel("c")


def test_bad_options_are_refused() -> None:
    for options, message in (({"quantum": math.inf}, "finite"), ({"quantum": 0}, "positive"),
                             ({"local_queue_tokens": 0}, "local_queue_tokens"),
                             ({"local_queue_requests": 1.5}, "local_queue_requests"),
                             ({"queue_beyond_free_slots": 0}, "queue_beyond_free_slots"),
                             ({"affinity_ratio": 0.5}, "affinity_ratio"), ({"output_weight": -1}, "w_q"),
                             ({"wait_for_shared_prefill": "yes"}, "wait_for_shared_prefill"),
                             ({"worker_max_running": 0}, "worker_max_running"),
                             ({"worker_chunk_tokens": 0}, "worker_chunk_tokens"),
                             ({"worker_chunk_tokens": 1.5}, "worker_chunk_tokens")):
        with pytest.raises(ValueError, match=message):
            make_router("d2lpm_global", 2, **options)


# ---- the global bound ----------------------------------------------------------------


def global_bound(router: GlobalDLPMRouter, clients: list[ClientSpec]) -> float:
    """2 (Q + w_q |W| M_G + w_e |W| (B + L + R L)) (docs/fairness.md, Theorem G)."""
    longest = max(c.prefix_len + c.suffix_len[1] for c in clients)
    r = router.options.local_queue_requests + router.options.reserve_for_newcomers  # the kept place counts as one more
    # Output a worker's dispatched requests can still produce: its batch and its local queue.
    m_g = (BATCH + r) * max(c.output_len[1] for c in clients)
    workers = router.num_workers
    return 2 * (router.fair.options.quantum + W_Q * workers * m_g
                + W_E * workers * (router.options.local_queue_tokens + longest + r * longest))


def paper_bound(workers: int, clients: list[ClientSpec], local_quantum: float) -> float:
    """Theorem 5.1: 2 |W| (U + Q^u), U = w_e L + w_q M."""
    longest = max(c.prefix_len + c.suffix_len[1] for c in clients)
    m = BATCH * max(c.output_len[1] for c in clients)
    return 2 * workers * (W_E * longest + W_Q * m + local_quantum)


def _random_clients(rng: random.Random) -> list[ClientSpec]:
    clients = []
    for i in range(rng.choice([2, 3, 4])):
        group = rng.choice([None, 1, 2, i + 10])
        clients.append(ClientSpec(
            f"c{i}", group, rng.randint(16, 160) if group is not None else 0,
            (1, rng.randint(8, 96)), (1, rng.randint(4, 40)),
            outstanding=rng.choice([1, 2, 3, 8, 48]),  # closed loop: many keep few requests in flight
        ))
    return clients


def _gaps(cum: dict[str, list[float]], busy: dict[str, list[bool]]) -> float:
    return max(max_backlogged_gap(cum[a], cum[b], busy[a], busy[b]) for a in cum for b in cum if a < b)


@pytest.mark.parametrize("seed", range(25))
def test_global_bound_between_clients_waiting_anywhere(seed: int) -> None:
    rng = random.Random(seed)
    workers = rng.choice([2, 3, 4])
    clients = _random_clients(rng)
    router = _router(workers, quantum=rng.choice([100.0, 500.0, 2000.0]),
                     local_queue_tokens=rng.choice([32, 128, 512]), local_queue_requests=rng.choice([1, 2, 8]),
                     affinity_ratio=rng.choice([None, 1.5]), wait_for_shared_prefill=rng.choice([False, True]),
                     reserve_for_newcomers=rng.choice([False, True]),
                     worker_chunk_tokens=rng.choice([None, 32, 64]),
                     lane_workers=rng.choice([0, 1]), lane_tokens=rng.choice([64, 256]),
                     worker_max_running=rng.choice([None, BATCH]), queue_beyond_free_slots=rng.choice([1, 4]))
    busy: dict[str, list[bool]] = {}
    cum = run_cluster(router, clients, steps=600, seed=seed, batch=BATCH, local_quantum=256.0, backlogged=busy)
    assert _gaps(cum, busy) <= global_bound(router, clients)
    assert all(v[-1] > 0 for v in cum.values())


# f keeps a long shared prefix and a few requests in flight (sticky, closed loop); g
# floods with unrelated prompts. Placement at arrival cannot be fair to both.
SKEWED = [
    ClientSpec("f", 1, 160, (1, 8), (8, 24), outstanding=6),
    ClientSpec("g", None, 0, (96, 160), (8, 24), outstanding=64),
]
# h floods short requests under one prefix; v keeps a few long unrelated ones.
FLOOD = [
    ClientSpec("h", 1, 160, (1, 16), (8, 24), outstanding=64),
    ClientSpec("v", None, 0, (32, 96), (8, 24), outstanding=4),
]
WORKERS, STEPS, LOCAL_Q = 4, 1500, 64.0


def _fair_router() -> GlobalDLPMRouter:
    return _router(WORKERS, quantum=500.0, local_queue_tokens=128, local_queue_requests=2)


def _run(router, clients: list[ClientSpec], local_policy: str) -> tuple[float, float]:
    """(largest gap between clients both waiting somewhere, total service)."""
    busy: dict[str, list[bool]] = {}
    cum = run_cluster(router, clients, STEPS, batch=BATCH, local_quantum=LOCAL_Q, backlogged=busy,
                      local_policy=local_policy)
    return _gaps(cum, busy), sum(v[-1] for v in cum.values())


@pytest.mark.parametrize("clients", [SKEWED, FLOOD], ids=["skewed", "flood"])
def test_late_binding_keeps_the_global_bound(clients: list[ClientSpec]) -> None:
    router = _fair_router()
    gap, total = _run(router, clients, "dlpm")
    assert gap <= global_bound(router, clients)
    _, total_rr = _run(make_router("round_robin", WORKERS), clients, "lpm")
    # Waiting for a client stuck in a local queue costs some idle time, not the cluster's throughput.
    assert total > 0.85 * total_rr, (total, total_rr)


def test_placement_at_arrival_breaks_the_bounds() -> None:
    bound = global_bound(_fair_router(), SKEWED)
    # Algorithm 2 breaks its own Theorem 5.1 bound when placement is skewed, and the global one.
    gap, _ = _run(make_router("d2lpm", WORKERS, quantum=20_000.0), SKEWED, "dlpm")
    assert gap > max(bound, paper_bound(WORKERS, SKEWED, LOCAL_Q)), gap
    # Round robin with LPM workers lets a flooding client take the cluster.
    gap, _ = _run(make_router("round_robin", WORKERS), FLOOD, "lpm")
    assert gap > global_bound(_fair_router(), FLOOD), gap


def test_a_worker_idles_only_while_refill_waits_for_a_client_in_a_local_queue() -> None:
    """With both waits off, a worker with room and a held request coexist only
    when CHECKREFILL is blocked by a positive client whose request waits on a worker."""
    rng = random.Random(3)
    router = _router(3, quantum=300.0, local_queue_tokens=64, local_queue_requests=2, affinity_ratio=None,
                     wait_for_shared_prefill=False)
    clients = _random_clients(rng)
    original = router._pump
    idle_checks = 0

    def checked_pump() -> None:
        nonlocal idle_checks
        original()
        if router.held and router.queues.rooms():
            idle_checks += 1
            held_clients = router.held.by_client
            assert all((router.fair.counter(c) or 0.0) <= 0 for c in held_clients)
            blockers = [c for c, a in router.fair.activity.items()
                        if a.queued > 0 and c not in held_clients and (router.fair.counter(c) or 0.0) > 0]
            assert blockers

    router._pump = checked_pump  # type: ignore[method-assign]
    cum = run_cluster(router, clients, steps=300, batch=BATCH)
    assert all(v[-1] > 0 for v in cum.values())
    assert idle_checks > 0  # the situation arises: the assertions above ran


def test_a_busy_holder_of_a_shared_template_is_rebalanced_to_a_light_worker() -> None:
    # Every prompt starts with the same template, cached on worker 0 only: without
    # Preble's rebalance every request would pile onto worker 0.
    r = _router(2, quantum=1e6)
    template = list(range(400))
    placed = []
    for i in range(6):  # each admitted at once, so none waits for the template's first prefill
        placed.append(r.route(f"t{i}", "x", template + [10_000 + 100 * i + k for k in range(8)], 256))
        r.on_admitted(f"t{i}", placed[-1])
    assert placed[0] == 0 and 1 in placed  # worker 1 takes work once worker 0 is 1.5x busier
    r2 = _router(2, quantum=1e6, affinity_ratio=None)
    assert r2.route("a", "x", template + [1], 256) == 0
    r2.on_admitted("a", 0)
    assert r2.route("b", "x", template + [2], 256) == 0  # no rebalance without the affinity rule


def test_siblings_are_not_rebalanced_away_from_the_worker_computing_their_prefix() -> None:
    # Six calls on one 3,000-token document arrive together at an empty cluster. The first
    # goes to worker 0; its prefill makes worker 0 look 1.5x busier than worker 1, but sent
    # there the others would compute the document again, and wait about as long for it.
    # (3,000 tokens: more than a local queue's 2,048, and several chunks of 1,024.)
    document = list(range(3000))
    for chunk in (None, 1024):
        r = _router(2, quantum=1e6, worker_chunk_tokens=chunk)
        assert r.route("q0", "x", document + [1], 16) == 0
        held = [r.route(f"q{i}", "x", document + [1 + i], 16) for i in range(1, 6)]
        assert held == [None] * 5  # the shared-prefill wait: q0 is alone in worker 0's local queue
        r.on_admitted("q0", 0, cached_tokens=0)
        placed = [w for _, w in r.take_released()]
        if chunk is None:  # the router cannot tell whether q0's prefill is done: Preble's rule spreads
            assert 1 in placed
        else:  # worker 0 is known to be prefilling the document (rule 7): the siblings join it
            assert placed == [0] * 5
    # A prefix within a local queue's tokens (2,048) is cheaper to compute again than to wait for.
    r = _router(2, quantum=1e6, worker_chunk_tokens=1024)
    short = list(range(1000))
    assert r.route("s0", "x", short + [1], 16) == 0
    assert r.route("s1", "x", short + [2], 16) == 1


def _template_placements(light_client: bool) -> list[int]:
    """Where six requests of client x sharing a 400-token template go, after x has three
    unrelated requests dispatched (and, with ``light_client``, another client one)."""
    r = _router(2, quantum=1e6)
    if light_client:
        r.on_admitted("y0", r.route("y0", "light", [50_000 + j for j in range(8)], 4))
    for k in range(3):
        r.on_admitted(f"u{k}", r.route(f"u{k}", "x", [60_000 + 100 * k + j for j in range(50)], 64))
    placed = []
    for i in range(6):
        placed.append(r.route(f"t{i}", "x", list(range(400)) + [10_000 + 100 * i + k for k in range(8)], 256))
        r.on_admitted(f"t{i}", placed[-1])
    return placed


def test_a_client_over_its_share_is_not_spread_to_recompute_its_template() -> None:
    # Alone, x is never over its share: Preble's rebalance spreads it over both workers.
    assert set(_template_placements(light_client=False)) == {0, 1}
    # Beside a light client, x (three running against one) is over its share: its template
    # requests stay where the template is cached, and no worker computes it twice.
    assert len(set(_template_placements(light_client=True))) == 1


def test_a_room_only_a_recompute_can_fill_still_gets_it() -> None:
    r = _router(2, quantum=1e6, local_queue_requests=1)
    r.on_admitted("y0", r.route("y0", "light", [50_000 + j for j in range(8)], 4))
    for k in range(3):
        r.on_admitted(f"u{k}", r.route(f"u{k}", "x", [60_000 + 100 * k + j for j in range(50)], 64))
    template = list(range(400))
    holder = r.route("t0", "x", template + [1], 256)
    r.on_admitted("t0", holder)
    assert r.route("t1", "x", template + [2], 256) == holder  # its local queue is now full
    # x is over its share and t2 would recompute the template on the other worker, but
    # nothing else waits: the room is not left idle.
    assert r.route("t2", "x", template + [3], 256) == 1 - holder


def test_other_work_goes_ahead_of_a_request_whose_prefix_is_still_being_sent() -> None:
    # b shares a's 400 uncached tokens: sent while a waits, both would prefill them in one batch.
    r = _router(1, quantum=1e6, local_queue_requests=2)
    article = list(range(400))
    assert r.route("x0", "x", list(range(5000, 5100)), 16) == 0
    assert r.route("a", "x", article + [1, 2], 16) == 0
    assert r.route("b", "x", article + [3, 4], 16) is None  # no room
    assert r.route("c", "x", list(range(1000, 1100)), 16) is None
    r.on_admitted("x0", 0)  # one room; b ranks first (longest match) but a is not admitted yet
    assert r.take_released() == [("c", 0)]
    r.on_admitted("a", 0)  # a's prefill is under way: b will find the article cached
    assert r.take_released() == [("b", 0)]
    assert 1e6 - r.fair.policy.deficits["x"] == 100 + 402 + 100 + 2  # b is charged its own tokens only


def test_the_wait_lasts_only_while_the_sibling_is_next_in_its_local_queue() -> None:
    article = list(range(400))
    r = _router(1, quantum=1e6)
    assert r.route("a", "x", article + [1, 2], 16) == 0
    assert r.route("b", "x", article + [3, 4], 16) is None  # a is alone: admitted at the next batch
    r.on_admitted("a", 0)
    assert r.take_released() == [("b", 0)]
    # Behind other requests a's admission may take longer than computing the article
    # again, and b, holding a positive deficit, would block every refill meanwhile.
    r = _router(1, quantum=1e6)
    assert r.route("x0", "x", list(range(5000, 5100)), 16) == 0
    assert r.route("a", "x", article + [1, 2], 16) == 0
    assert r.route("b", "x", article + [3, 4], 16) == 0


def test_no_wait_on_a_worker_whose_batch_is_full() -> None:
    article = list(range(400))
    r = _router(1, quantum=1e6, worker_max_running=1)
    assert r.route("x0", "x", list(range(5000, 5100)), 16) == 0
    r.on_admitted("x0", 0)  # the worker's one running slot is taken
    assert r.route("a", "x", article + [1, 2], 16) == 0
    assert r.route("b", "x", article + [3, 4], 16) == 0  # a waits for a slot, not for the next batch
    for rid in ("x0", "a", "b"):
        r.on_admitted(rid, 0)
        r.on_finish(rid, 0, 16)
    assert r.route("c", "x", list(range(2000, 2400)) + [1], 16) == 0
    assert r.route("d", "x", list(range(2000, 2400)) + [2], 16) is None  # slots free again: d waits


def test_a_worker_prefilling_a_prompt_of_several_chunks_takes_only_requests_sharing_it() -> None:
    # Worker 0 admits a 3,000-token document with chunks of 1,024: its next batches are that
    # prompt's chunks, so an unrelated request goes to worker 1 although worker 0 is lighter.
    document = list(range(3000))
    r = _router(2, quantum=1e6, worker_chunk_tokens=1024)
    assert r.route("doc", "x", document + [1], 16) == 0
    r.on_admitted("doc", 0, cached_tokens=0)
    assert r.route("big", "x", list(range(10_000, 10_100)), 2000) == 1  # worker 1 now carries more work
    r.on_admitted("big", 1)
    assert r.route("other", "y", list(range(20_000, 20_050)), 16) == 1
    assert r.route("follower", "x", document + [2], 16) == 0  # shares the prompt: hits its cache after
    # With worker 1 full, the unrelated request waits rather than queue behind the chunks.
    r.on_admitted("other", 1)
    r.on_admitted("follower", 0)
    tight = _router(2, quantum=1e6, worker_chunk_tokens=1024, local_queue_requests=1)
    assert tight.route("doc", "x", document + [1], 16) == 0
    tight.on_admitted("doc", 0, cached_tokens=0)
    assert tight.route("w1", "x", list(range(10_000, 10_100)), 16) == 1
    assert tight.route("late", "x", list(range(20_000, 20_050)), 16) is None
    assert tight.hold_reasons() == {"late": "passed over"}
    tight.on_progress("doc", 0, 0)  # a report without output: still prefilling
    assert tight.take_released() == []
    tight.on_progress("doc", 0, 1)  # its first token: the chunks are done
    assert tight.take_released() == [("late", 0)]


def test_a_prompt_of_one_chunk_or_an_unknown_chunk_size_binds_no_worker() -> None:
    document = list(range(3000))
    for chunk, cached, bound in ((None, 0, False), (4096, 0, False), (1024, 2500, False), (1024, 1000, True)):
        r = _router(2, quantum=1e6, worker_chunk_tokens=chunk)
        assert r.route("doc", "x", document + [1], 16) == 0
        r.on_admitted("doc", 0, cached_tokens=cached)  # what the worker computes decides
        assert r.route("big", "x", list(range(10_000, 10_100)), 2000) == 1
        r.on_admitted("big", 1)  # (x waiting in a local queue with credit would block y's first refill)
        assert r.route("other", "y", list(range(20_000, 20_050)), 16) == (1 if bound else 0)
        r.on_finish("doc", 0, 16)
        assert not r.waits.prefilling[0]  # a finished request binds nothing


def test_a_short_shared_start_or_a_cached_prefix_does_not_wait() -> None:
    r = _router(1, quantum=1e6)
    head = list(range(20))  # fewer than 32 shared tokens: nothing worth waiting for
    assert r.route("a", "x", head + [100 + k for k in range(40)], 16) == 0
    assert r.route("b", "x", head + [200 + k for k in range(40)], 16) == 0
    article = list(range(1000, 1400))
    assert r.route("c", "x", article + [1], 16) == 0
    r.on_admitted("c", 0)
    assert r.route("d", "x", article + [2], 16) == 0  # computed by an admitted request: cached
    assert r.route("e", "x", article + [3], 16) == 0  # d computes only its last token
    for chunk in (None, 1024):  # (the chunk size makes the router keep sent prompts too)
        off = _router(1, quantum=1e6, wait_for_shared_prefill=False, worker_chunk_tokens=chunk)
        assert off.route("a", "x", article + [1], 16) == 0
        assert off.route("b", "x", article + [2], 16) == 0


def test_run_time_settings_reach_the_cluster_dlpm_but_not_throttle_limits() -> None:
    from sglang_fair.core import SettingsUpdate

    router = _router(2, quantum=500.0)
    router.update_settings(SettingsUpdate.parse({"quantum": 900, "client_weights": {"alice": 2},
                                                 "throttle": {"user_limit": 3}}))
    assert router.fair.settings()["quantum"] == 900.0 and router.fair.options.weight_of("alice") == 2.0


def test_running_requests_near_their_last_token_count_as_free_slots() -> None:
    """A batch admitted together ends together: its successors wait in the local queue before it does."""
    r = _router(1, worker_max_running=2, queue_beyond_free_slots=1, local_queue_requests=16)
    for i in range(8):
        r.route(f"r{i}", "x", [100 * i + j for j in range(20)], 32)
    assert len(r.queues.local[0]) == 3  # two free slots and one more
    for rid in list(r.queues.local[0])[:2]:
        r.on_admitted(rid, 0, 0)  # the batch is full now
    assert len(r.queues.local[0]) == 1  # no free slot: one beyond
    running = [rid for rid in r.inflight if rid not in r.queues.local[0]]
    r.on_progress(running[0], 0, 20)  # 12 tokens to go: not yet
    assert r.queues.finishing[0] == set() and len(r.queues.local[0]) == 1
    r.on_progress(running[0], 0, 24)  # 8 to go: about to free its slot, its successor goes now
    assert r.queues.finishing[0] == {running[0]} and len(r.queues.local[0]) == 2
    r.on_progress(running[1], 0, 28)
    assert r.queues.finishing[0] == set(running) and len(r.queues.local[0]) == 3  # both count as free
    r.on_finish(running[0], 0, 32)
    assert r.queues.finishing[0] == {running[1]}
    off = _router(1, worker_max_running=2, queue_beyond_free_slots=1, finishing_tokens=0)
    off.route("a", "x", [1] * 20, 32)
    off.on_admitted("a", 0, 0)
    off.on_progress("a", 0, 31)
    assert off.queues.finishing[0] == set()  # 0: only a finished request frees its slot
    import pytest

    with pytest.raises(ValueError, match="finishing_tokens must be an integer >= 0"):
        _router(1, finishing_tokens=-1)
