"""The simulator's radix cache: unit checks, and a differential test against
SGLang's own ``RadixCache`` (random insert / match / lock / unlock / evict
sequences must give the same matched lengths, evicted counts and tree)."""

from __future__ import annotations

import itertools
import random
import types

import pytest

from sglang_fair.sim.radix import RadixCache


def test_match_insert_split_and_sizes():
    cache = RadixCache()
    assert cache.insert((1, 2, 3, 4)) == 0
    assert cache.insert((1, 2, 5)) == 2  # splits (1,2,3,4) after two tokens
    assert cache.match((1, 2, 3, 9)).length == 3
    assert cache.match((7,)).length == 0
    assert cache.stored_paths() == {(1, 2), (1, 2, 3), (1, 2, 3, 4), (1, 2, 5)}  # the match split (3, 4)
    assert cache.evictable_size == cache.total_size == 5


def test_locked_prefix_survives_and_lru_order():
    cache = RadixCache()
    cache.insert((1, 2, 3))
    cache.insert((4, 5))
    cache.insert((6, 7, 8, 9))
    held = cache.match((4, 5)).node
    cache.lock(held)
    assert cache.protected_size == 2
    cache.match((6, 7, 8, 9))  # refresh: (1,2,3) is now least recently used
    assert cache.evict(1) == 3  # a whole leaf goes even when fewer tokens were asked
    assert cache.stored_paths() == {(4, 5), (6, 7, 8, 9)}
    assert cache.evict(100) == 4  # the locked (4, 5) stays
    assert cache.stored_paths() == {(4, 5)}
    cache.unlock(held)
    assert cache.evict(100) == 2 and cache.total_size == 0


def test_unlock_without_lock_is_an_error():
    cache = RadixCache()
    cache.insert((1, 2))
    with pytest.raises(ValueError, match="not locked"):
        cache.unlock(cache.match((1, 2)).node)


def test_eviction_callback_sees_full_path():
    seen = []
    cache = RadixCache(on_evict=lambda node: seen.append(node.path()))
    cache.insert((1, 2, 3))
    cache.insert((1, 2, 4))
    cache.evict(10)
    assert seen == [(1, 2, 3), (1, 2, 4), (1, 2)]


@pytest.mark.engine
@pytest.mark.parametrize("seed", range(6))
def test_same_behaviour_as_sglang_radix_cache(seed, monkeypatch):
    import torch
    from sglang.srt.mem_cache import radix_cache as sg
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams

    # SGLang stamps nodes with time.monotonic(); a strictly increasing counter
    # gives both trees the same LRU order without depending on clock resolution.
    ticks = itertools.count(1)
    monkeypatch.setattr(sg, "time", types.SimpleNamespace(monotonic=lambda: float(next(ticks)),
                                                         perf_counter=lambda: 0.0))

    class Allocator:  # eviction frees KV slots through the allocator
        device = "cpu"

        def free_segment(self, *args, **kwargs):
            pass

    theirs = sg.RadixCache.create_simulated(mock_allocator=Allocator())
    ours = RadixCache()

    def key(tokens):
        return sg.RadixKey(token_ids=list(tokens))

    def their_paths():
        out, stack = set(), [(theirs.root_node, ())]
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                path = prefix + tuple(child.key.token_ids)
                out.add(path)
                stack.append((child, path))
        return out

    rng = random.Random(seed)
    locks: list[tuple[object, object]] = []
    for _ in range(400):
        seq = tuple(rng.randrange(3) for _ in range(rng.randint(1, 10)))
        op = rng.random()
        if op < 0.35:
            theirs.insert(InsertParams(key=key(seq), value=torch.tensor(seq, dtype=torch.int64)))
            ours.insert(seq)
        elif op < 0.6:
            m = theirs.match_prefix(MatchPrefixParams(key=key(seq)))
            assert ours.match(seq).length == _device_len(m)
        elif op < 0.75:
            m_theirs = theirs.match_prefix(MatchPrefixParams(key=key(seq)))
            m_ours = ours.match(seq)
            assert m_ours.length == _device_len(m_theirs)
            theirs.inc_lock_ref(m_theirs.last_device_node)
            ours.lock(m_ours.node)
            locks.append((m_theirs.last_device_node, m_ours.node))
        elif op < 0.85 and locks:
            node_theirs, node_ours = locks.pop(rng.randrange(len(locks)))
            theirs.dec_lock_ref(node_theirs)
            ours.unlock(node_ours)
        else:
            n = rng.randint(1, 8)
            assert ours.evict(n) == theirs.evict(EvictParams(num_tokens=n)).num_tokens_evicted
        assert ours.stored_paths() == their_paths()
        assert ours.evictable_size == theirs.evictable_size()
        assert ours.protected_size == theirs.protected_size()


def _device_len(match) -> int:
    """SGLang's matched device prefix: ``device_prefix_len`` from 0.5.22, ``device_indices`` on 0.5.21."""
    return match.device_prefix_len if hasattr(match, "device_prefix_len") else len(match.device_indices)
