"""sglang_fair.router: ROUTERS and make_router (used by the simulator and the SGLang binding)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from sglang_fair.router import ROUTERS, Router, WorkerSettings, make_router, with_worker_settings
from sglang_fair.router.worker_settings import ROUTER_OPTION


def test_all_methods_registered() -> None:
    assert set(ROUTERS) == {"round_robin", "per_client_round_robin", "shortest_queue", "preble", "cache_aware", "d2lpm",
                            "d2lpm_global", "gie", "dynamo"}


def test_unknown_router_and_option() -> None:
    with pytest.raises(ValueError, match="unknown router 'nope'.*d2lpm"):
        make_router("nope", 2)
    with pytest.raises(ValueError, match="does not take option"):
        make_router("round_robin", 2, quantum=5)
    with pytest.raises(ValueError, match="at least one worker"):
        make_router("d2lpm", 0)


def _with(name: str, options: dict | None = None, **workers: object) -> dict:
    return with_worker_settings(name, options or {}, WorkerSettings(**workers))


def test_routers_that_charge_tokens_take_the_policy_weights() -> None:
    assert _with("d2lpm", {"quantum": 5}, output_weight=4.0) == {"quantum": 5, "input_weight": 1.0,
                                                                 "output_weight": 4.0}
    assert _with("d2lpm_global", {"output_weight": 4}, output_weight=4.0)["output_weight"] == 4.0
    assert _with("round_robin", output_weight=4.0) == {}
    for given in (3.0, "4", True):
        with pytest.raises(ValueError, match="contradicts --fair-output-weight"):
            _with("d2lpm", {"output_weight": given}, output_weight=4.0)


def test_the_cluster_wide_dlpm_takes_the_policy_quantum_unless_its_own_is_set() -> None:
    assert _with("d2lpm_global", quantum=256.0)["quantum"] == 256.0
    assert _with("d2lpm_global", {"quantum": 4096}, quantum=256.0)["quantum"] == 4096
    assert make_router("d2lpm_global", 2, **_with("d2lpm_global", quantum=256.0)).fair.options.quantum == 256.0
    # Algorithm 2's Q^w is a per-worker quantum of its own, not Q^u; Dynamo's quantum is its own too.
    for name in ("d2lpm", "round_robin", "dynamo"):
        assert "quantum" not in _with(name, quantum=256.0)


def test_the_late_binding_router_learns_the_workers_running_limit() -> None:
    assert _with("d2lpm_global", max_running_requests=4)["worker_max_running"] == 4
    assert "worker_max_running" not in _with("d2lpm_global")
    assert "worker_max_running" not in _with("d2lpm", max_running_requests=4)


def test_the_late_binding_router_learns_the_chunk_size_of_workers_that_mix_chunks() -> None:
    assert _with("d2lpm_global", mixed_chunk_tokens=1024)["worker_chunk_tokens"] == 1024
    for tokens in (None, -1):  # not mixing, or chunking off
        assert "worker_chunk_tokens" not in _with("d2lpm_global", mixed_chunk_tokens=tokens)
    assert "worker_chunk_tokens" not in _with("preble", mixed_chunk_tokens=1024)


# A value for every worker setting, unlike each router's default.
SET = {"quantum": 256.0, "client_weights": {"alice": 2.0}, "isolation": True, "max_running_requests": 7,
       "mixed_chunk_tokens": 333, "kv_pool_tokens": 12345, "max_prefill_tokens": 4321, "idle_timeout_s": 77.0}


@pytest.mark.parametrize("setting", sorted(ROUTER_OPTION))
def test_every_worker_setting_reaches_each_router_that_takes_it_and_is_applied(setting: str) -> None:
    option = ROUTER_OPTION[setting]
    takers = [name for name, cls in ROUTERS.items() if option in cls.option_defaults()
              and (setting != "quantum" or cls.follows_policy_quantum)]
    assert takers, f"no router takes {option}: the setting would go nowhere"
    for name in takers:
        options = _with(name, **{setting: SET[setting]})
        assert options[option] == SET[setting], name
        make_router(name, 2, **options)  # a real option of the router, with a value it accepts
        assert _with(name, {option: options[option]}, **{setting: SET[setting]})[option] == SET[setting]


def test_worker_settings_cover_the_launcher_options() -> None:
    assert set(ROUTER_OPTION) == {f.name for f in dataclasses.fields(WorkerSettings)} - {"input_weight",
                                                                                          "output_weight"}


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
