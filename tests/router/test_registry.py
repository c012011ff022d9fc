"""sglang_fair.router: ROUTERS and make_router (used by the simulator and the SGLang binding)."""

from __future__ import annotations

import random

import pytest

from sglang_fair.router import ROUTERS, Router, make_router, with_policy_settings


def test_all_methods_registered() -> None:
    assert set(ROUTERS) == {"round_robin", "per_client_round_robin", "shortest_queue", "preble", "cache_aware", "d2lpm",
                            "d2lpm_global"}


def test_unknown_router_and_option() -> None:
    with pytest.raises(ValueError, match="unknown router 'nope'.*d2lpm"):
        make_router("nope", 2)
    with pytest.raises(ValueError, match="does not take option"):
        make_router("round_robin", 2, quantum=5)
    with pytest.raises(ValueError, match="at least one worker"):
        make_router("d2lpm", 0)


def test_routers_that_charge_tokens_take_the_policy_weights() -> None:
    assert with_policy_settings("d2lpm", {"quantum": 5}, 1.0, 4.0) == {"quantum": 5, "input_weight": 1.0,
                                                                      "output_weight": 4.0}
    assert with_policy_settings("d2lpm_global", {"output_weight": 4}, 1.0, 4.0)["output_weight"] == 4.0
    assert with_policy_settings("round_robin", {}, 1.0, 4.0) == {}
    for given in (3.0, "4", True):
        with pytest.raises(ValueError, match="contradicts --fair-output-weight"):
            with_policy_settings("d2lpm", {"output_weight": given}, 1.0, 4.0)


def test_the_cluster_wide_dlpm_takes_the_policy_quantum_unless_its_own_is_set() -> None:
    assert with_policy_settings("d2lpm_global", {}, 1.0, 2.0, 256.0)["quantum"] == 256.0
    assert with_policy_settings("d2lpm_global", {"quantum": 4096}, 1.0, 2.0, 256.0)["quantum"] == 4096
    assert make_router("d2lpm_global", 2, **with_policy_settings("d2lpm_global", {}, 1.0, 2.0, 256.0)).fair.options.quantum == 256.0
    # Algorithm 2's Q^w is a per-worker quantum of its own, not Q^u.
    assert "quantum" not in with_policy_settings("d2lpm", {}, 1.0, 2.0, 256.0)
    assert "quantum" not in with_policy_settings("round_robin", {}, 1.0, 2.0, 256.0)


def test_the_late_binding_router_learns_the_workers_running_limit() -> None:
    assert with_policy_settings("d2lpm_global", {}, 1.0, 2.0, None, 4)["worker_max_running"] == 4
    assert "worker_max_running" not in with_policy_settings("d2lpm_global", {}, 1.0, 2.0, None, None)
    assert "worker_max_running" not in with_policy_settings("d2lpm", {}, 1.0, 2.0, None, 4)


def test_the_late_binding_router_learns_the_chunk_size_of_workers_that_mix_chunks() -> None:
    assert with_policy_settings("d2lpm_global", {}, 1.0, 2.0, mixed_chunk_tokens=1024)["worker_chunk_tokens"] == 1024
    for tokens in (None, -1):  # not mixing, or chunking off
        assert "worker_chunk_tokens" not in with_policy_settings("d2lpm_global", {}, 1.0, 2.0, mixed_chunk_tokens=tokens)
    assert "worker_chunk_tokens" not in with_policy_settings("preble", {}, 1.0, 2.0, mixed_chunk_tokens=1024)


@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_every_router_keeps_queue_sizes_consistent_under_random_feedback(name: str) -> None:
    rng = random.Random(7)
    r: Router = make_router(name, 4)
    placed: list[str] = []  # on a worker, not finished
    held: set[str] = set()  # kept by a late-binding router

    def collect() -> None:
        for rid, w in r.take_released():
            assert rid in held and r.alive[w]
            held.remove(rid)
            placed.append(rid)

    for i in range(400):
        op = rng.random()
        if op < 0.55 or not placed:
            tokens = [rng.randrange(3)] * rng.randint(1, 40) + [rng.randrange(100) for _ in range(5)]
            try:
                w = r.route(f"r{i}", f"c{rng.randrange(3)}", tokens, rng.randint(1, 20))
            except Exception as exc:  # only when all are down
                assert not any(r.alive), exc
                continue
            if w is None:
                assert r.holds_requests
                held.add(f"r{i}")
            else:
                assert r.alive[w]
                placed.append(f"r{i}")
        elif op < 0.75:
            rid = placed.pop(rng.randrange(len(placed)))
            r.on_finish(rid, rng.randrange(4), rng.randint(0, 30))
            r.on_finish(rid, 0, 1)  # duplicate: ignored
        elif op < 0.88:
            rid = rng.choice(placed)
            r.on_admitted(rid, r.inflight[rid].worker, rng.randint(0, 40))
            r.on_progress(rid, r.inflight[rid].worker, rng.randint(0, 30))
        elif op < 0.9:
            if held:
                rid = sorted(held)[0]
                assert r.cancel(rid)
                held.remove(rid)
            assert not r.cancel(rng.choice(placed))  # placed: the worker answers it
        elif op < 0.95:
            r.on_evicted(rng.randrange(4), [rng.randrange(3)] * rng.randint(1, 40))
            r.on_cached(rng.randrange(4), [rng.randrange(3)] * rng.randint(1, 40))
        elif op < 0.97:
            r.on_cache_cleared(rng.randrange(4))
        else:
            w = rng.randrange(4)
            if r.alive[w] and sum(r.alive) > 1:
                for rid in r.on_worker_down(w):
                    placed.remove(rid)
        collect()
        expect = [0] * 4
        for d in r.inflight.values():
            expect[d.worker] += 1
        assert r.queue_sizes == expect
        assert sorted(r.inflight) == sorted(placed)
