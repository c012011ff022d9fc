"""The package's RadixIndex against the frozen token-tree oracle: same answers, same routing.

Long random prompts with shared stems exercise every path of the edge
compare (whole edge inside the prompt, prompt ending inside an edge,
divergence before, at and after the 32-token steps of the fallback scan),
and a small capacity makes the LRU trim run constantly.
"""

from __future__ import annotations

import random

import pytest

from sglang_fair.router import make_router
from sglang_fair.router.radix_index import RadixIndex, pack
from tests.router.token_tree_oracle import RadixIndex as OracleIndex

STEMS = [[random.Random(s).randrange(50) for _ in range(300)] for s in range(4)]


def _prompt(rng: random.Random) -> list[int]:
    # Divergence anywhere in 0..300 tokens of a stem, then a tail from a tiny
    # alphabet so prompts also share (and split) edges inside their tails.
    stem = STEMS[rng.randrange(len(STEMS))]
    return stem[: rng.randint(0, len(stem))] + [rng.randrange(3) for _ in range(rng.randint(0, 80))]


def _same_state(new: RadixIndex, old: OracleIndex) -> None:
    assert sorted(new.iter_paths()) == sorted(old.iter_paths())
    assert new.worker_tokens == old.worker_tokens
    assert new.total_tokens == old.total_tokens


@pytest.mark.parametrize("seed", range(8))
def test_random_operations_match_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    workers = 4
    capacity = rng.choice([10**9, 2_000, 600])
    new, old = RadixIndex(workers, capacity), OracleIndex(workers, capacity)
    for step in range(500):
        tokens, w, op = _prompt(rng), rng.randrange(workers), rng.random()
        if op < 0.45:
            new.insert(tokens, w, after=new.match(tokens))
            old.insert(tokens, w, after=old.match(tokens))
        elif op < 0.6:
            new.insert(tokens, w)
            old.insert(tokens, w)
        elif op < 0.85:
            new.prune(tokens, w)
            old.prune(tokens, w)
        elif op < 0.88:
            new.drop_worker(w)
            old.drop_worker(w)
        probe = _prompt(rng)
        a, b = new.match(probe), old.match(probe)
        assert (a.length, a.workers) == (b.length, b.workers)
        assert [a.cached_len(x) for x in range(workers)] == [b.cached_len(x) for x in range(workers)]
        assert a.cached_lens(workers) == [b.cached_len(x) for x in range(workers)]
        if step % 25 == 0:
            _same_state(new, old)
    _same_state(new, old)


def _trace(seed: int, n: int) -> list[tuple[str, list[int]]]:
    """Chat-like traffic: clients reuse system prompts and extend their own previous prompts."""
    rng = random.Random(seed)
    systems = [[rng.randrange(1000) for _ in range(rng.randint(50, 400))] for _ in range(12)]
    last: dict[str, list[int]] = {}
    out = []
    for _ in range(n):
        client = f"c{rng.randrange(10)}"
        if client in last and rng.random() < 0.5:
            tokens = last[client] + [rng.randrange(1000) for _ in range(rng.randint(1, 60))]
        else:
            tokens = systems[rng.randrange(len(systems))] + [rng.randrange(1000) for _ in range(rng.randint(0, 200))]
        last[client] = tokens
        out.append((client, tokens))
    return out


class _PackingOracle(OracleIndex):
    """The oracle's answers, plus the packed prompt d2lpm_global compares look-alikes by.

    It reports every path as changed at every pass (the empty prefix), so
    d2lpm_global looks every held request up again: the package's index, which
    reports only the paths that lost a worker, must lead to the same decisions.
    """

    def match(self, tokens, touch=True):
        found = super().match(tokens, touch)
        found.packed = pack(tokens)
        return found

    def take_removals(self):
        return {b"": -1}


@pytest.mark.parametrize("name", ["d2lpm", "preble", "cache_aware", "d2lpm_global"])
def test_routing_decisions_identical_to_oracle(name: str) -> None:
    """Record one trace's decisions with each index: agreement must be 100%.

    Workers admit more slowly than requests arrive, so d2lpm_global holds a
    backlog whose prefixes the evictions cut into and the workers' reports of
    prompt + output extend."""
    workers = 4
    routers = [make_router(name, workers, index_capacity_tokens=8_000) for _ in range(2)]
    routers[1].index = _PackingOracle(workers, 8_000)
    rng = random.Random(7)
    decisions: list[list[tuple[str, int]]] = [[], []]
    local: list[list[tuple[str, int]]] = [[], []]  # placed, not yet admitted
    inflight: list[list[tuple[str, int]]] = [[], []]

    def admit(k: int, router, count: int) -> None:
        for _ in range(min(count, len(local[k]))):
            done = local[k].pop(0)
            router.on_admitted(*done)
            inflight[k].append(done)
            if len(inflight[k]) > 12:
                rid, worker = inflight[k].pop(0)
                router.on_finish(rid, worker, 16)
                router.on_cached(worker, prompts[rid] + [int(rid[1:]) % 7] * 16)
            for placed in router.take_released():
                decisions[k].append(placed)
                local[k].append(placed)

    prompts: dict[str, list[int]] = {}
    for i, (client, tokens) in enumerate(_trace(3, 600)):
        prompts[f"r{i}"] = tokens
        evict = rng.random() < 0.1
        keep = rng.choice([len(tokens) // 2, rng.randrange(len(tokens))])  # shallow cuts reach held look-alikes
        admissions = rng.choice([0, 1, 1])
        for k, router in enumerate(routers):
            rid = f"r{i}"
            w = router.route(rid, client, tokens, 16)
            placed = [(rid, w)] if w is not None else []
            placed += router.take_released()
            decisions[k] += placed
            local[k] += placed
            admit(k, router, admissions)
            if evict:  # a worker's cache feedback: it lost the tail of this prompt
                router.on_evicted(i % workers, tokens[: keep + 1])
    for k, router in enumerate(routers):
        while local[k]:
            admit(k, router, 1)
    same = sum(a == b for a, b in zip(*decisions))
    assert len(decisions[0]) == len(decisions[1]) == 600
    assert same == len(decisions[0]), f"{name}: {same}/{len(decisions[0])} decisions agree"
