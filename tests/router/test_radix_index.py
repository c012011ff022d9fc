"""RadixIndex against a brute-force model: per worker, the set of cached prefixes."""

from __future__ import annotations

import random

import pytest

from sglang_fair.router.radix_index import RadixIndex, pack, workers_of


class Model:
    def __init__(self, num_workers: int) -> None:
        self.cached = [set() for _ in range(num_workers)]

    def insert(self, tokens, w):
        for k in range(1, len(tokens) + 1):
            self.cached[w].add(tuple(tokens[:k]))

    def prune(self, tokens, w):
        if not tokens:
            return  # evicting "nothing" is a no-op by contract
        t = tuple(tokens)
        self.cached[w] = {p for p in self.cached[w] if not (len(p) >= len(t) and p[: len(t)] == t)}

    def drop(self, w):
        self.cached[w] = set()

    def match(self, tokens):
        for k in range(len(tokens), 0, -1):
            holders = [w for w, s in enumerate(self.cached) if tuple(tokens[:k]) in s]
            if holders:
                return k, holders
        return 0, []


def _random_tokens(rng: random.Random) -> list[int]:
    # Small alphabet and shared stems so splits, partial matches and prunes mid-edge all happen.
    stem = [[1, 2, 3, 4, 5, 6], [1, 2, 9], [7, 7, 7, 7]][rng.randrange(3)]
    return stem[: rng.randint(0, len(stem))] + [rng.randrange(4) for _ in range(rng.randint(0, 6))]


@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_model(seed: int) -> None:
    rng = random.Random(seed)
    index, model = RadixIndex(3, capacity_tokens=10**9), Model(3)
    for _ in range(400):
        op = rng.random()
        tokens = _random_tokens(rng)
        w = rng.randrange(3)
        if op < 0.5:
            index.insert(tokens, w)
            model.insert(tokens, w)
        elif op < 0.8:
            index.prune(tokens, w)
            model.prune(tokens, w)
        elif op < 0.83:
            index.drop_worker(w)
            model.drop(w)
        probe = _random_tokens(rng)
        m = index.match(probe)
        length, holders = model.match(probe)
        assert m.length == length
        assert (workers_of(m.workers) if m.length else []) == holders
        for worker in range(3):
            expect = max((len(p) for p in model.cached[worker] if tuple(probe[: len(p)]) == p), default=0)
            assert m.cached_len(worker) == expect
        # Token accounting: a worker's tokens are its distinct cached prefixes.
        assert index.worker_tokens == [len(s) for s in model.cached]
        assert index.total_tokens == len(set().union(*model.cached))


def test_no_empty_nodes_left_after_prunes() -> None:
    index = RadixIndex(2, capacity_tokens=10**6)
    index.insert([1, 2, 3, 4], 0)
    index.insert([1, 2, 5], 1)
    index.prune([1, 2, 3], 0)  # worker 0 keeps [1, 2]
    index.prune([1], 1)  # worker 1 keeps nothing
    paths = sorted(index.iter_paths())
    assert paths == [([1, 2], 0b01)]
    assert index.total_tokens == 2


def test_unknown_prefix_prune_is_noop() -> None:
    index = RadixIndex(2)
    index.insert([1, 2, 3], 0)
    index.prune([9, 9], 0)
    index.prune([1, 2, 3, 4], 0)
    index.prune([], 0)
    index.prune([1, 2, 3], 1)
    assert index.match([1, 2, 3]).length == 3
    assert index.worker_tokens == [3, 0]


def test_capacity_evicts_least_recently_used() -> None:
    index = RadixIndex(2, capacity_tokens=100)
    for i in range(10):
        index.insert([i] * 20, i % 2)
        index.match([0] * 20)  # keep prompt 0 hot
        assert index.total_tokens <= 100
    assert index.match([0] * 20).length == 20
    assert index.match([9] * 20).length == 20  # most recent insert survives
    assert index.match([1] * 20).length == 0  # cold ones are gone
    assert sum(index.worker_tokens) == index.total_tokens


def test_capacity_keeps_shared_stem_while_leaves_go() -> None:
    index = RadixIndex(1, capacity_tokens=60)
    stem = list(range(30))
    for i in range(20):
        index.insert(stem + [1000 + i] * 10, 0)
    assert index.total_tokens <= 60
    assert index.match(stem + [5]).length == 30


def test_single_prompt_larger_than_capacity_is_not_kept() -> None:
    index = RadixIndex(1, capacity_tokens=10)
    index.insert(list(range(50)), 0)
    assert index.total_tokens == 0 and index.match(list(range(50))).length == 0


@pytest.mark.parametrize("bad", [0, -5, 1.5])
def test_bad_capacity(bad) -> None:
    with pytest.raises(ValueError, match="capacity"):
        RadixIndex(2, capacity_tokens=bad)


def test_bad_worker() -> None:
    index = RadixIndex(2)
    with pytest.raises(ValueError, match="out of range"):
        index.insert([1], 2)


@pytest.mark.parametrize("seed", range(6))
def test_insert_after_match_equals_plain_insert(seed: int) -> None:
    rng = random.Random(seed)
    fast, slow = RadixIndex(2, capacity_tokens=10**9), RadixIndex(2, capacity_tokens=10**9)
    for _ in range(300):
        tokens, w = _random_tokens(rng), rng.randrange(2)
        m = fast.match(tokens)
        if rng.random() < 0.3:
            # A change between match and insert makes the match stale: it must not be used.
            other = _random_tokens(rng) + [rng.randrange(4)]
            if rng.random() < 0.5:
                fast.insert(other, 1 - w)
                slow.insert(other, 1 - w)
            else:
                fast.prune(other, w)
                slow.prune(other, w)
        fast.insert(tokens, w, after=m)
        slow.insert(tokens, w)
        assert sorted(fast.iter_paths()) == sorted(slow.iter_paths())
        assert fast.worker_tokens == slow.worker_tokens


def _naive_common_len(a: list[int], b: list[int], start: int) -> int:
    n = 0
    while n < len(a) and start + n < len(b) and a[n] == b[start + n]:
        n += 1
    return n


@pytest.mark.parametrize("seed", range(4))
def test_common_len_every_divergence_point(seed: int) -> None:
    # Edges shorter and longer than the rest of the prompt, divergence at every
    # offset around the 32-token first chunk of the scan and inside later chunks,
    # and tokens that differ in one byte only (a mismatch is found per token,
    # never inside one).
    from sglang_fair.router.radix_index import PACKED_TOKEN_BYTES, _common_len, common_prefix_len, pack

    rng = random.Random(seed)
    base = [rng.randrange(10**6, 10**7) for _ in range(300)]
    for edge_len in (1, 31, 32, 33, 100, 300):
        edge = base[:edge_len]
        for start in (0, 7):
            for cut in range(0, edge_len + 2, 3):
                tail = [base[cut] ^ 1] if cut < len(base) else []
                prompt = [0] * start + base[:cut] + tail + [-1] * rng.randint(0, 40)
                expected = _naive_common_len(edge, prompt, start)
                assert _common_len(pack(edge), pack(prompt), start * PACKED_TOKEN_BYTES) == expected * PACKED_TOKEN_BYTES
                if start == 0:
                    assert common_prefix_len(pack(edge), pack(prompt)) == expected == common_prefix_len(pack(prompt), pack(edge))


def test_cached_len_per_worker_and_prune_feedback() -> None:
    index = RadixIndex(3)
    stem = list(range(100, 400))
    index.insert(stem + [1, 2, 3], 0)
    index.insert(stem + [1, 9], 1)
    index.insert(stem[:50], 2)
    m = index.match(stem + [1, 2, 7])
    assert (m.length, workers_of(m.workers)) == (302, [0])
    assert [m.cached_len(w) for w in range(3)] == [302, 301, 50]
    index.prune(stem + [1, 2], 0)  # worker 0 evicted from token 301 on: keeps stem + [1]
    m = index.match(stem + [1, 2, 7])
    assert (m.length, workers_of(m.workers)) == (301, [0, 1])
    assert [m.cached_len(w) for w in range(3)] == [301, 301, 50]
    assert index.worker_tokens == [301, 302, 50]


def test_refresh_reuses_a_match_only_while_the_tree_is_unchanged() -> None:
    index = RadixIndex(2)
    stem = list(range(100, 300))
    index.insert(stem, 0)
    held = index.match(stem + [7])
    index.match(list(range(5)))  # lookups change nothing
    assert index.refresh(held) is held
    index.insert(stem, 1)  # masks change, the tree's shape does not
    again = index.refresh(held)
    assert again is not held and [again.cached_len(w) for w in range(2)] == [200, 200]
    assert index.refresh(again) is again
    index.prune(stem, 0)  # worker 0 keeps stem[:-1]
    assert [index.refresh(again).cached_len(w) for w in range(2)] == [199, 200]
    index.insert(stem + [7, 8], 1)  # a new leaf
    assert index.refresh(index.match(stem)).cached_len(1) == 200
    assert index.refresh(again).length == 201


def test_removals_name_the_first_tokens_of_every_path_that_lost_a_worker() -> None:
    index = RadixIndex(2, capacity_tokens=1_000)
    stem = list(range(100, 300))
    index.insert(stem + [1], 0)
    index.prune(stem + [1], 0)
    assert index.take_removals() == {}  # nobody watches: nothing is kept
    index.watch_removals(16)
    index.insert(stem + [1], 0)
    index.prune(stem[:50], 1)  # worker 1 never held it: nothing changes
    assert index.take_removals() == {}
    index.prune(stem + [1], 0)
    index.insert(list(range(5)), 1)
    index.prune(list(range(3)), 1)  # worker 1 keeps 2 tokens: the path cut is shorter than 16
    # Each with the tokens above the edge removed (worker 0 keeps the stem, worker 1 two
    # tokens): a match no longer than that lost nothing.
    assert index.take_removals() == {pack(stem[:16]): 200, pack([0, 1, 2, 3, 4]): 2}
    assert index.take_removals() == {}  # taken once
    index.drop_worker(1)
    assert index.take_removals() == {pack([0, 1]): 0}
    index.insert(list(range(5000, 5900)), 1)  # past capacity: the least recently used path goes,
    assert index.take_removals() == {pack(stem[:16]): 49}  # below the split the no-op prune made
    with pytest.raises(ValueError, match="at least one token"):
        index.watch_removals(0)


def test_prompts_as_sglang_sends_them_index_like_lists() -> None:
    # SGLang hands the router input_ids as an array("q"); lists, tuples and
    # arrays of the same tokens are one prompt to the index.
    from array import array

    index = RadixIndex(2)
    stem = list(range(1000, 1300))
    index.insert(array("q", stem + [1, 2]), 0)
    index.insert(tuple(stem + [5]), 1)
    for prompt in (stem + [1, 2, 3], array("q", stem + [1, 2, 3]), tuple(stem + [1, 2, 3])):
        m = index.match(prompt)
        assert (m.length, workers_of(m.workers), m.cached_lens(2)) == (302, [0], [302, 300])
    prompt = array("q", stem + [9])
    m = index.match(prompt)
    index.insert(prompt, 1, after=m)  # the walk is reused for the same object
    assert index.match(stem + [9]).cached_lens(2) == [300, 301]
    assert sorted(index.iter_paths()) == sorted([(stem + [1, 2], 0b01), (stem + [5], 0b10), (stem + [9], 0b10)])
