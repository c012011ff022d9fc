"""A radix prefix cache with the semantics of SGLang's ``RadixCache`` (page size 1).

Same tree shape (nodes split where keys diverge), same LRU eviction of
unlocked leaves (a parent whose last child goes becomes a candidate in the
same pass, and a whole leaf is evicted even if that overshoots the request),
same lock references (locking a node protects its whole root path). SGLang
stamps ``time.monotonic()`` on every match/insert and on every node it
creates; here a logical clock ticks at the same points, so the eviction
order is the same and the simulation is deterministic.

Evictable leaves live in a lazy min-heap keyed by last access instead of
being heapified on every ``evict`` call: same order, much cheaper when the
cache holds many leaves.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass


class Node:
    __slots__ = ("key", "children", "parent", "lock_ref", "last_access", "id")

    def __init__(self, key: tuple[int, ...], parent: Node | None, stamp: int) -> None:
        self.key = key
        self.children: dict[int, Node] = {}
        self.parent = parent
        self.lock_ref = 0
        self.last_access = stamp
        self.id = stamp  # creation stamps are unique: a stable tie-break

    def path(self) -> tuple[int, ...]:
        """All tokens from the root to the end of this node."""
        parts = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            parts.append(node.key)
            node = node.parent
        return tuple(itertools.chain.from_iterable(reversed(parts)))


@dataclass(frozen=True)
class Match:
    length: int  # tokens of the key found in the cache
    node: Node  # last matched node: lock it to protect the prefix


def _common_prefix(a: tuple[int, ...], b: Sequence[int], start: int) -> int:
    """Length of the common prefix of ``a`` and ``b[start:]``."""
    n = min(len(a), len(b) - start)
    seg = tuple(b[start : start + n])
    if a[:n] == seg:
        return n
    lo, hi = 0, n  # invariant: a[:lo] == seg[:lo] and a[:hi] != seg[:hi]
    while hi - lo > 1:  # binary search on C-speed slice compares
        mid = (lo + hi) // 2
        if a[:mid] == seg[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class RadixCache:
    def __init__(self, on_evict: Callable[[Node], None] | None = None) -> None:
        self._clock = itertools.count(1)
        self.root = Node((), None, 0)
        self.root.lock_ref = 1  # the root is never evicted
        self.evictable_size = 0  # tokens in unlocked nodes
        self.protected_size = 0  # tokens in locked nodes
        self._leaf_heap: list[tuple[int, int, Node]] = []
        self._leaves: set[Node] = set()  # evictable leaves
        # Called with each evicted node before it is detached (router feedback).
        self.on_evict = on_evict

    @property
    def total_size(self) -> int:
        return self.evictable_size + self.protected_size

    # -- lookup / insert ----------------------------------------------------
    def match(self, tokens: Sequence[int]) -> Match:
        """Longest cached prefix of ``tokens``; refreshes LRU stamps on its path."""
        if not tokens:
            return Match(0, self.root)
        return Match(*self._descend(tokens))

    def insert(self, tokens: Sequence[int]) -> int:
        """Store ``tokens``; returns how many were already cached."""
        pos, node = self._descend(tokens)
        n = len(tokens)
        if pos < n:
            leaf = Node(tuple(tokens[pos:]), node, next(self._clock))
            node.children[leaf.key[0]] = leaf
            self.evictable_size += len(leaf.key)
            self._update_leaf(node)
            self._update_leaf(leaf)
        return pos

    def _descend(self, tokens: Sequence[int]) -> tuple[int, Node]:
        """Walk the longest cached prefix of ``tokens``, touching the nodes on the way.

        A match that ends inside a node splits it there (as SGLang does), so the
        returned node always ends exactly at the matched length.
        """
        now = next(self._clock)
        node = self.root
        node.last_access = now
        pos, n = 0, len(tokens)
        while pos < n:
            child = node.children.get(tokens[pos])
            if child is None:
                break
            self._touch(child, now)
            klen = len(child.key)
            if pos + klen <= n and child.key == tuple(tokens[pos : pos + klen]):
                pos += klen
                node = child
                continue
            split = _common_prefix(child.key, tokens, pos)
            node = self._split(child, split)
            pos += split
            break
        return pos, node

    def _split(self, child: Node, at: int) -> Node:
        """Cut ``child`` after ``at`` tokens; returns the new upper node."""
        upper = Node(child.key[:at], child.parent, next(self._clock))
        upper.lock_ref = child.lock_ref
        child.parent.children[upper.key[0]] = upper  # type: ignore[union-attr]
        child.key = child.key[at:]
        child.parent = upper
        upper.children[child.key[0]] = child
        return upper

    def _touch(self, node: Node, now: int) -> None:
        node.last_access = now
        if node in self._leaves:
            heapq.heappush(self._leaf_heap, (now, node.id, node))

    # -- locks ----------------------------------------------------------------
    def lock(self, node: Node) -> None:
        """Protect ``node`` and its ancestors from eviction (a running request)."""
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
            node.lock_ref += 1
            self._update_leaf(node)
            node = node.parent  # type: ignore[assignment]

    def unlock(self, node: Node) -> None:
        while node is not self.root:
            if node.lock_ref <= 0:
                raise ValueError("unlock of a node that is not locked")
            if node.lock_ref == 1:
                self.evictable_size += len(node.key)
                self.protected_size -= len(node.key)
            node.lock_ref -= 1
            self._update_leaf(node)
            node = node.parent  # type: ignore[assignment]

    # -- eviction -------------------------------------------------------------
    def evict(self, num_tokens: int) -> int:
        """Evict least recently used unlocked leaves until ``num_tokens`` are freed."""
        evicted = 0
        heap = self._leaf_heap
        while evicted < num_tokens and heap:
            stamp, _, node = heapq.heappop(heap)
            if node not in self._leaves or stamp != node.last_access:
                continue  # stale entry
            if self.on_evict is not None:
                self.on_evict(node)
            evicted += len(node.key)
            parent = node.parent
            del parent.children[node.key[0]]  # type: ignore[union-attr]
            self.evictable_size -= len(node.key)
            self._leaves.discard(node)
            node.parent = None
            self._update_leaf(parent)  # type: ignore[arg-type]
        return evicted

    def _update_leaf(self, node: Node) -> None:
        if node.lock_ref > 0 or node.children:
            self._leaves.discard(node)
        elif node not in self._leaves:
            self._leaves.add(node)
            heapq.heappush(self._leaf_heap, (node.last_access, node.id, node))

    # -- inspection (tests, metrics) -----------------------------------------
    def stored_paths(self) -> set[tuple[int, ...]]:
        """Every node's full token path: the tree's content, shape included."""
        out: set[tuple[int, ...]] = set()
        stack = [(self.root, ())]
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                path = prefix + child.key
                out.add(path)
                stack.append((child, path))
        return out
