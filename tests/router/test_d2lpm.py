"""D²LPM (Algorithm 2): dispatch rules, deficits, Theorem 5.1 bound, Theorem A.5 counterexample, faults."""

from __future__ import annotations

import math
import random

import pytest

from tests.router.router_cluster import ClientSpec, max_interval_gap, run_cluster
from sglang_fair.router import NoLiveWorkerError, make_router
from sglang_fair.router.d2lpm import D2LPMRouter

PREFIX = list(range(100))


def _prompt(n: int, tail: int = 5) -> list[int]:
    return PREFIX + [10_000 + n * 10 + i for i in range(tail)]


def test_first_request_refills_and_goes_to_least_loaded() -> None:
    r = D2LPMRouter(3, quantum=1000)
    r.queue_sizes[:] = [2, 0, 1]  # pretend other traffic
    assert r.route("a", "alice", _prompt(0), 8) == 1
    # One refill of Q^w on every worker, then w_e * input charged on worker 1.
    assert r.deficits["alice"] == [1000.0, 1000.0 - 105, 1000.0]
    assert r.refills == 1


def test_locality_until_deficit_runs_out_then_least_loaded_positive() -> None:
    r = D2LPMRouter(3, quantum=250, input_weight=1.0, output_weight=2.0)
    assert r.route("a0", "alice", _prompt(0), 8) == 0
    # Worker 0 holds the prefix and alice is still positive there: stays, although busier.
    assert r.route("a1", "alice", _prompt(1), 8) == 0
    assert r.deficits["alice"][0] == 250 - 2 * 105
    # Next one exhausts worker 0 (40 - 105 < 0): the request after goes elsewhere.
    assert r.route("a2", "alice", _prompt(2), 8) == 0
    assert r.deficits["alice"][0] < 0
    w = r.route("a3", "alice", _prompt(3), 8)
    assert w == 1  # least-loaded among positive workers 1, 2
    # Now workers 0 and 1 both hold the prefix; 1 is positive -> locality again.
    assert r.route("a4", "alice", _prompt(4), 8) == 1


def test_refill_only_when_no_worker_is_positive() -> None:
    r = D2LPMRouter(2, quantum=100)
    r.route("a", "c", list(range(150)), 1)  # worker 0: 100 - 150 = -50
    assert r.deficits["c"] == [-50.0, 100.0]
    r.route("b", "c", list(range(500, 650)), 1)  # worker 1 is positive: no refill
    assert r.refills == 1 and r.deficits["c"] == [-50.0, -50.0]
    r.route("d", "c", list(range(900, 910)), 1)
    # All non-positive: refilled (once is enough) for both workers.
    assert r.refills == 2
    assert sorted(r.deficits["c"]) == [40.0, 50.0]


def test_multiple_refill_rounds_in_one_step() -> None:
    r = D2LPMRouter(2, quantum=10)
    r.route("a", "c", list(range(95)), 1)
    r.on_finish("a", 0, 0)
    r.route("b", "c", list(range(200, 295)), 1)
    assert r.deficits["c"] == [-85.0, -85.0]
    r.route("x", "c", [5], 1)
    # The loop of Algorithm 2 would run 9 times: -85 + 90 = 5 > 0; then worker 0
    # (shorter queue) is charged 1 for the one-token prompt.
    assert r.deficits["c"] == [4.0, 5.0]


def test_completion_charges_output_to_the_worker_that_ran_it_and_frees_queue() -> None:
    r = D2LPMRouter(2, quantum=1000, output_weight=3.0)
    w = r.route("a", "c", [1, 2, 3], 10)
    before = list(r.deficits["c"])
    r.on_finish("a", 1 - w, 7)  # the reported worker is not trusted over the dispatch record
    assert r.deficits["c"][w] == before[w] - 21
    assert r.queue_sizes == [0, 0]
    r.on_finish("a", w, 7)  # duplicate completion: ignored
    r.on_finish("never-routed", 0, 7)
    assert r.deficits["c"][w] == before[w] - 21


def test_clients_have_independent_counters() -> None:
    r = D2LPMRouter(2, quantum=50)
    r.route("a", "heavy", list(range(500)), 1)
    assert r.route("b", "light", list(range(500)), 1) == 0  # locality on worker 0, its own deficit
    assert r.deficits["light"][0] == 50 - 500


def test_evicted_prefix_is_not_sought_anymore() -> None:
    r = D2LPMRouter(2, quantum=10**6)
    r.route("a", "c", _prompt(0), 1)
    r.queue_sizes[0] = 5  # worker 0 busy
    assert r.route("c", "c", _prompt(1), 1) == 0  # locality beats load
    r.on_evicted(0, PREFIX[:1])  # worker 0 dropped the whole prefix
    assert r.route("d", "c", _prompt(2), 1) == 1


def test_on_cached_feeds_the_index() -> None:
    r = D2LPMRouter(3)
    r.on_cached(2, PREFIX)
    assert r.route("a", "c", _prompt(0), 1) == 2
    r.on_cached(7, PREFIX)  # out of range: ignored, never raises
    r.on_evicted(-1, PREFIX)


def test_worker_down_returns_its_requests_and_drops_its_cache() -> None:
    r = D2LPMRouter(3, quantum=10**6)
    placed = {rid: r.route(rid, "c", _prompt(i), 1) for i, rid in enumerate(["a", "b", "c"])}
    assert set(placed.values()) == {0}
    r.route("z", "other", [77], 1)
    lost = r.on_worker_down(0)
    assert sorted(lost) == ["a", "b", "c"]
    assert r.queue_sizes[0] == 0 and "a" not in r.inflight
    assert r.index.match(PREFIX).length == 0
    for i in range(10):
        assert r.route(f"n{i}", "c", _prompt(10 + i), 1) != 0
    r.on_finish("a", 0, 5)  # late completion from the dead worker: ignored
    assert r.queue_sizes[0] == 0
    r.on_worker_down(1)
    r.on_worker_down(2)
    with pytest.raises(NoLiveWorkerError):
        r.route("x", "c", [1], 1)


def test_duplicate_rid_is_refused() -> None:
    r = D2LPMRouter(2)
    r.route("a", "c", [1], 1)
    with pytest.raises(ValueError, match="already in flight"):
        r.route("a", "c", [2], 1)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "10", True])
def test_bad_quantum(bad) -> None:
    with pytest.raises(ValueError, match="Q\\^w"):
        make_router("d2lpm", 2, quantum=bad)


def test_bad_weights() -> None:
    with pytest.raises(ValueError, match="weight"):
        make_router("d2lpm", 2, input_weight=-1)
    with pytest.raises(ValueError, match="both be 0"):
        make_router("d2lpm", 2, input_weight=0, output_weight=0)


# ---- Theorems 5.1 and A.5 on a small deterministic cluster -----------------------

BATCH, LOCAL_Q = 4, 256.0


def _bound(num_workers: int, clients: list[ClientSpec]) -> float:
    """2 |W| (U + Q^u), U = w_e L_input + w_q M, M the tokens one worker holds."""
    l_input = max(c.prefix_len + c.suffix_len[1] for c in clients)
    l_output = max(c.output_len[1] for c in clients)
    m = BATCH * (l_input + l_output)
    u = 1.0 * l_input + 2.0 * m
    return 2 * num_workers * (u + LOCAL_Q)


def _random_clients(rng: random.Random) -> list[ClientSpec]:
    clients = []
    for i in range(rng.randint(2, 4)):
        shared = rng.random() < 0.7
        clients.append(
            ClientSpec(
                f"c{i}",
                i if shared else None,
                rng.randint(16, 96) if shared else 0,
                (1, rng.randint(2, 64)),
                (1, rng.randint(2, 48)),
            )
        )
    return clients


@pytest.mark.parametrize("seed", range(6))
def test_theorem_5_1_bound_for_backlogged_clients(seed: int) -> None:
    rng = random.Random(seed)
    workers = rng.choice([2, 3, 4])
    clients = _random_clients(rng)
    router = make_router("d2lpm", workers, quantum=rng.choice([200.0, 2000.0, 20000.0]))
    cum = run_cluster(router, clients, steps=800, seed=seed, batch=BATCH, local_quantum=LOCAL_Q)
    bound = _bound(workers, clients)
    for a in cum:
        for b in cum:
            assert max_interval_gap(cum[a], cum[b]) <= bound, (a, b)
    assert all(v[-1] > 0 for v in cum.values())


SKEWED = [
    ClientSpec("f", 1, 96, (1, 16), (4, 32)),  # long shared prefix: sticky
    ClientSpec("g", None, 0, (32, 112), (4, 32)),  # nothing shared: spread out
]


def test_theorem_a5_infinite_worker_quantum_is_unfair() -> None:
    workers, steps = 4, 1500
    bound = _bound(workers, SKEWED)
    unfair = run_cluster(make_router("d2lpm", workers, quantum=math.inf), SKEWED, steps, batch=BATCH, local_quantum=LOCAL_Q)
    fair = run_cluster(make_router("d2lpm", workers, quantum=2048.0), SKEWED, steps, batch=BATCH, local_quantum=LOCAL_Q)
    # With Q^w = inf, f sticks to the worker holding its prefix while g gets the rest:
    # the gap grows with time past any constant bound.
    assert unfair["g"][-1] > 2.5 * unfair["f"][-1]
    assert max_interval_gap(unfair["f"], unfair["g"]) > bound
    half = steps // 2
    assert max_interval_gap(unfair["f"][:half], unfair["g"][:half]) < max_interval_gap(unfair["f"], unfair["g"])
    # The same trace with a finite Q^w stays within the Theorem 5.1 bound.
    assert max_interval_gap(fair["f"], fair["g"]) <= bound
    assert 0.8 < fair["g"][-1] / fair["f"][-1] < 1.25
