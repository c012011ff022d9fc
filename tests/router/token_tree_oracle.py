"""Test oracle: the global radix index as it was before the single-copy edge compare.

A frozen copy of ``sglang_fair/router/radix_index.py`` (two slices per edge
compare, and ``refresh`` always walking again), kept only so tests can check that the package's index answers and
routes exactly as this one on randomized operations and recorded traces.
Not used by the package.

One tree for all workers. Each node holds an edge of tokens and a bitmask of
the workers that cache the whole path from the root to the end of that edge.
A worker caching a path caches every prefix of it (radix caches evict leaves
first), so a node's mask is a subset of its parent's, and the deepest node a
prompt reaches names the workers holding its longest match.

Memory is bounded by ``capacity_tokens`` (tokens stored on edges, counted once
however many workers share them): past it, least-recently-used leaves are
dropped for all workers. Forgetting a prefix only costs locality, never
correctness, so the cap is safe to make small.

LRU order is an ``OrderedDict`` of nodes where every touch moves the path to
the end deepest-first; hence each node sits before all its ancestors and the
front is always a leaf, so eviction is O(1) per node.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

DEFAULT_CAPACITY_TOKENS = 4_000_000


class _Node:
    __slots__ = ("key", "children", "parent", "mask")

    def __init__(self, key: list[int], parent: _Node | None, mask: int) -> None:
        self.key = key
        self.children: dict[int, _Node] = {}
        self.parent = parent
        self.mask = mask


@dataclass
class Match:
    """The result of a lookup.

    ``length``: tokens of the longest prefix any worker caches; ``workers``:
    bitmask of the workers caching exactly that much; ``depths``: for each
    node on the path, (tokens matched up to it, its mask), root excluded, so
    per-worker match lengths can be read without a second walk.
    """

    length: int
    workers: int
    depths: list[tuple[int, int]]
    # The walk itself, so an insert of the same prompt right after (routing)
    # does not compare the tokens again; valid while the tree is unchanged.
    _walk: tuple[list[_Node], list[int], int] | None = None
    _version: int = -1
    _tokens: list[int] | None = None

    def cached_len(self, worker: int) -> int:
        bit = 1 << worker
        best = 0
        for depth, mask in self.depths:
            if mask & bit:
                best = depth
            else:
                break
        return best

    def cached_lens(self, num_workers: int) -> list[int]:
        """Reference for the one-pass version: ``cached_len`` asked worker by worker."""
        return [self.cached_len(w) for w in range(num_workers)]


def workers_of(mask: int) -> list[int]:
    """The worker indices set in ``mask``, ascending."""
    out = []
    w = 0
    while mask:
        if mask & 1:
            out.append(w)
        mask >>= 1
        w += 1
    return out


def _common_len(a: list[int], b: list[int], start: int) -> int:
    """Length of the common prefix of ``a`` and ``b[start:]``.

    Compares growing slices (C-level list equality) and only scans the last
    small chunk token by token, so the cost is O(match) copies, not
    O(edge x log edge) as a plain binary search over whole-edge slices.
    """
    n = min(len(a), len(b) - start)
    if a[:n] == b[start : start + n]:
        return n
    lo, step = 0, 32
    while True:
        hi = min(lo + step, n)
        if a[lo:hi] == b[start + lo : start + hi]:
            lo = hi
            step *= 2
        elif hi - lo <= 32:
            while a[lo] == b[start + lo]:
                lo += 1
            return lo
        else:
            step = (hi - lo) // 2


class RadixIndex:
    def __init__(self, num_workers: int, capacity_tokens: int = DEFAULT_CAPACITY_TOKENS) -> None:
        if num_workers < 1:
            raise ValueError(f"radix index needs at least one worker, got {num_workers}")
        if not isinstance(capacity_tokens, int) or capacity_tokens < 1:
            raise ValueError(f"index capacity must be a positive number of tokens, got {capacity_tokens!r}")
        self.num_workers = num_workers
        self.capacity_tokens = capacity_tokens
        self.root = _Node([], None, (1 << num_workers) - 1)
        self.total_tokens = 0
        # Tokens each worker is believed to cache (for "smallest tree" rules).
        self.worker_tokens = [0] * num_workers
        self._lru: OrderedDict[_Node, None] = OrderedDict()
        self._version = 0  # bumped on every change of the tree's shape

    # ---- lookup -------------------------------------------------------------------

    def match(self, tokens: Sequence[int], touch: bool = True) -> Match:
        """Longest prefix of ``tokens`` cached by any worker, and who holds it (marks it used)."""
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        path, commons, pos = self._walk(tokens)
        if touch:
            self._touch(path)
        depths: list[tuple[int, int]] = []
        end = 0
        for node, n in zip(path, commons):
            end += n
            depths.append((end, node.mask))
        workers = path[-1].mask if path else 0
        return Match(pos, workers, depths, (path, commons, pos), self._version, tokens)

    def refresh(self, match: Match, touch: bool = True) -> Match:
        """Always a second walk: routers holding a request looked it up again at placement."""
        return self.match(match._tokens, touch)

    # ---- updates ------------------------------------------------------------------

    def insert(self, tokens: Sequence[int], worker: int, after: Match | None = None) -> None:
        """Record that ``worker`` caches ``tokens`` (and so every prefix of it).

        ``after``: the ``match`` of this same token list, to skip the second
        walk; ignored if the tree changed since or the list is another one.
        """
        self._check(worker)
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        if after is not None and after._walk is not None and after._version == self._version and after._tokens is tokens:
            path, commons, pos = after._walk
        else:
            path, commons, pos = self._walk(tokens)
        bit = 1 << worker
        node = self.root
        touched: list[_Node] = []
        for child, n in zip(path, commons):
            if n < len(child.key):
                child = self._split(child, n)
            if not child.mask & bit:
                child.mask |= bit
                self.worker_tokens[worker] += len(child.key)
            touched.append(child)
            node = child
        if pos < len(tokens):
            leaf = _Node(tokens[pos:], node, bit)
            node.children[tokens[pos]] = leaf
            added = len(leaf.key)
            self.total_tokens += added
            self.worker_tokens[worker] += added
            self._version += 1
            touched.append(leaf)
        self._touch(touched)
        self._enforce_capacity()

    def prune(self, tokens: Sequence[int], worker: int) -> None:
        """``worker`` no longer caches ``tokens`` in full: it keeps at most ``tokens[:-1]``.

        Every longer path through that point is dropped for ``worker`` too. An
        unknown prefix is a no-op (the index may already have forgotten it).
        """
        self._check(worker)
        if not tokens:
            return
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        cut = len(tokens) - 1  # the worker keeps tokens[:cut]
        node, pos = self.root, 0
        while True:
            child = node.children.get(tokens[pos])
            if child is None:
                return
            n = _common_len(child.key, tokens, pos)
            if pos + n <= cut:
                if n < len(child.key):
                    return  # the path diverges before the cut: not indexed
                pos += n
                node = child
                continue
            # The cut falls inside child's edge (or at its start).
            keep = cut - pos
            if keep > 0:
                child = self._split(child, keep)
                child = child.children[tokens[cut]]
            self._clear_subtree(child, 1 << worker)
            return

    def drop_worker(self, worker: int) -> None:
        """Forget everything ``worker`` caches (it died or restarted)."""
        self._check(worker)
        bit = 1 << worker
        for child in list(self.root.children.values()):
            if child.mask & bit:
                self._clear_subtree(child, bit)
        self.worker_tokens[worker] = 0

    def __len__(self) -> int:
        return self.total_tokens

    # ---- internals ----------------------------------------------------------------

    def _walk(self, tokens: list[int]) -> tuple[list[_Node], list[int], int]:
        """Nodes along ``tokens``, tokens matched in each, total matched."""
        node, pos = self.root, 0
        path: list[_Node] = []
        commons: list[int] = []
        end = len(tokens)
        while pos < end:
            child = node.children.get(tokens[pos])
            if child is None:
                break
            n = _common_len(child.key, tokens, pos)
            pos += n
            path.append(child)
            commons.append(n)
            if n < len(child.key):
                break
            node = child
        return path, commons, pos

    def _check(self, worker: int) -> None:
        if not 0 <= worker < self.num_workers:
            raise ValueError(f"worker {worker} out of range 0..{self.num_workers - 1}")

    def _split(self, node: _Node, at: int) -> _Node:
        """Split ``node``'s edge after ``at`` tokens; returns the new upper node."""
        parent = node.parent
        assert parent is not None and 0 < at < len(node.key)
        self._version += 1
        upper = _Node(node.key[:at], parent, node.mask)
        parent.children[upper.key[0]] = upper
        node.key = node.key[at:]
        node.parent = upper
        upper.children[node.key[0]] = node
        # The upper part is an ancestor: it must sit after node in LRU order.
        self._lru[upper] = None
        self._lru.move_to_end(upper)
        return upper

    def _touch(self, path: list[_Node]) -> None:
        lru = self._lru
        for node in reversed(path):
            lru[node] = None
            lru.move_to_end(node)

    def _clear_subtree(self, top: _Node, bit: int) -> None:
        worker = bit.bit_length() - 1
        stack = [top]
        while stack:
            node = stack.pop()
            if not node.mask & bit:
                continue
            node.mask &= ~bit
            self.worker_tokens[worker] -= len(node.key)
            if node.mask == 0:
                # Descendants hold at most ``bit``: _remove uncounts them.
                self._remove(node)
            else:
                stack.extend(node.children.values())

    def _remove(self, top: _Node) -> None:
        """Unlink ``top`` and its whole subtree."""
        parent = top.parent
        assert parent is not None
        del parent.children[top.key[0]]
        self._version += 1
        stack = [top]
        while stack:
            node = stack.pop()
            self.total_tokens -= len(node.key)
            for w in workers_of(node.mask):
                self.worker_tokens[w] -= len(node.key)
            self._lru.pop(node, None)
            stack.extend(node.children.values())

    def _enforce_capacity(self) -> None:
        lru = self._lru
        while self.total_tokens > self.capacity_tokens and lru:
            oldest = next(iter(lru))
            self._remove(oldest)

    def iter_paths(self) -> Iterator[tuple[list[int], int]]:
        """Every (full token path, mask) of the leaves: for tests and debugging."""
        stack: list[tuple[_Node, list[int]]] = [(c, c.key) for c in self.root.children.values()]
        while stack:
            node, path = stack.pop()
            if not node.children:
                yield path, node.mask
            for c in node.children.values():
                stack.append((c, path + c.key))
