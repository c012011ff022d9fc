"""A global radix index: token prefixes -> the set of workers caching them.

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

Edges are packed bytes (8 per token, the layout of the ``array("q")`` that
SGLang carries ``input_ids`` in), so a prompt from SGLang is packed by one
memory copy, an edge is compared by one ``memcmp`` (``bytes.startswith`` at an
offset, no copy), and a dropped edge is freed as one object: no Python step
and no int object per token anywhere, and answers stay token-exact. A token
list (the simulator, tests) is packed once per call by ``array("q", tokens)``.
Hashing fixed-size blocks (SGLang's KV event scheme) measured slower than
this: a hash per token plus Python work per block (docs/performance.md,
"Router decision time").

Paths that lose a worker are noted for routers that keep matches
(``watch_removals``; radix_removals.py), on removals only.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sglang_fair.router.radix_removals import RemovalWatch

DEFAULT_CAPACITY_TOKENS = 4_000_000
PACKED_TOKEN_BYTES = _T = 8  # bytes per packed token (array typecode "q")


def pack(tokens: Sequence[int]) -> bytes:
    """``tokens`` as the index stores them: int64 in native byte order."""
    if isinstance(tokens, array) and tokens.typecode == "q":
        return tokens.tobytes()
    return array("q", tokens).tobytes()


def unpack(packed: bytes) -> list[int]:
    """The token list ``pack`` made ``packed`` from."""
    return array("q", packed).tolist()


class _Node:
    __slots__ = ("key", "children", "parent", "mask")

    def __init__(self, key: bytes, parent: _Node | None, mask: int) -> None:
        self.key = key  # packed tokens of the edge into this node
        self.children: dict[bytes, _Node] = {}  # by the child edge's first packed token
        self.parent = parent
        self.mask = mask


@dataclass(slots=True)
class Match:
    """The result of a lookup.

    ``length``: tokens of the longest prefix any worker caches; ``workers``:
    bitmask of the workers caching exactly that much; ``depths``: for each
    node on the path, (tokens matched up to it, its mask), root excluded, so
    per-worker match lengths can be read without a second walk. ``packed``:
    the prompt as the index stores it (``pack``).
    """

    length: int
    workers: int
    depths: list[tuple[int, int]]
    packed: bytes = b""
    # The walk itself, so an insert of the same prompt right after (routing)
    # does not compare the tokens again; valid while the tree is unchanged
    # (``_version``: the index's version when the walk was made) and for the
    # same token object (``_source``).
    _walk: tuple[list[_Node], list[int], int] | None = None
    _version: int = -1
    _source: object = None
    _lens: list[int] | None = None

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
        """``cached_len`` of every worker, from one pass over the path (kept: routers ask often)."""
        if self._lens is None or len(self._lens) != num_workers:
            lens = [0] * num_workers
            for depth, mask in self.depths:  # masks shrink along the path: the last one holding w wins
                for w in workers_of(mask):
                    if w < num_workers:
                        lens[w] = depth
            self._lens = lens
        return self._lens


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


def _common_len(edge: bytes, packed: bytes, start: int) -> int:
    """Bytes of ``edge`` equal to ``packed[start:]``, a whole number of tokens.

    The usual case, a whole edge inside the prompt, is one ``memcmp``. On a
    mismatch, growing chunks are compared (O(match) bytes in all), then the
    last chunk is halved down to the first differing token.
    """
    if packed.startswith(edge, start):
        return len(edge)
    n = min(len(edge), len(packed) - start)
    lo, step = 0, 32 * _T
    while True:
        hi = min(lo + step, n)
        if hi == lo or not packed.startswith(edge[lo:hi], start + lo):
            break
        lo = hi
        step *= 2
    # edge[:lo] matches and edge[:hi] does not (hi > lo): halve (lo, hi) in tokens.
    good, bad = lo // _T, hi // _T
    while bad - good > 1:
        mid = (good + bad) // 2
        if packed.startswith(edge[lo : mid * _T], start + lo):
            good = mid
        else:
            bad = mid
    return good * _T


def common_prefix_len(a: bytes, b: bytes) -> int:
    """Tokens in the longest common prefix of two packed prompts (``pack``)."""
    if len(a) > len(b):
        a, b = b, a
    return _common_len(a, b, 0) // _T


class RadixIndex:
    def __init__(self, num_workers: int, capacity_tokens: int = DEFAULT_CAPACITY_TOKENS) -> None:
        if num_workers < 1:
            raise ValueError(f"radix index needs at least one worker, got {num_workers}")
        if not isinstance(capacity_tokens, int) or capacity_tokens < 1:
            raise ValueError(f"index capacity must be a positive number of tokens, got {capacity_tokens!r}")
        self.num_workers = num_workers
        self.capacity_tokens = capacity_tokens
        self.root = _Node(b"", None, (1 << num_workers) - 1)
        self.total_tokens = 0
        # Tokens each worker is believed to cache (for "smallest tree" rules).
        self.worker_tokens = [0] * num_workers
        self._lru: OrderedDict[_Node, None] = OrderedDict()
        self._version = 0  # bumped on every change of the tree: shape or masks
        self._holders: dict[int, list[int]] = {}  # workers_of, memoized: evictions ask per node
        self._removals = RemovalWatch()

    # ---- lookup -------------------------------------------------------------------

    def match(self, tokens: Sequence[int]) -> Match:
        """Longest prefix of ``tokens`` cached by any worker, and who holds it (marks it used)."""
        return self._match(pack(tokens), tokens)

    def _match(self, packed: bytes, source: object, touch: bool = True) -> Match:
        path, commons, pos = self._walk(packed)
        if touch:
            self._touch(path)
        depths: list[tuple[int, int]] = []
        end = 0
        for node, n in zip(path, commons):
            end += n
            depths.append((end // _T, node.mask))
        workers = path[-1].mask if path else 0
        return Match(pos // _T, workers, depths, packed, (path, commons, pos), self._version, source)

    def refresh(self, match: Match, touch: bool = True) -> Match:
        """``match`` if the tree has not changed since it was made, else a new match of its prompt.

        A router holding a request between lookup and placement pays for a
        second walk only when something was inserted or evicted meanwhile.
        ``touch=False``: a second look at a prompt already marked used, which
        leaves the LRU order as it is.
        """
        if match._version == self._version:
            return match
        return self._match(match.packed, match._source, touch)

    # ---- removals -----------------------------------------------------------------

    def watch_removals(self, prefix_tokens: int) -> None:
        """Keep, until ``take_removals``, the first ``prefix_tokens`` tokens of every path
        that lost a worker (pruned, dropped with its worker, or trimmed past capacity).

        A router that keeps matches of prompts it holds learns which ones an eviction
        may have shortened, instead of walking all of them again.
        """
        if prefix_tokens < 1:
            raise ValueError(f"removal prefixes need at least one token, got {prefix_tokens}")
        self._removals.watch(prefix_tokens * _T)

    def take_removals(self) -> dict[bytes, int]:
        """Packed prefixes (``watch_removals``) of the paths that lost a worker since the
        last call, each with the fewest tokens above an edge removed on such a path. Every
        match whose prompt does not start with one of them, or that is no longer than its
        tokens, is unchanged by removals; a prefix shorter than the watched length is the
        whole path that was cut."""
        return {prefix: above // _T for prefix, above in self._removals.take().items()}

    # ---- updates ------------------------------------------------------------------

    def insert(self, tokens: Sequence[int], worker: int, after: Match | None = None) -> None:
        """Record that ``worker`` caches ``tokens`` (and so every prefix of it).

        ``after``: the ``match`` of this same token object, to skip packing and
        the second walk; ignored if the tree changed since or it is another one.
        """
        self._check(worker)
        if after is not None and after._source is tokens:
            packed = after.packed
            if after._walk is not None and after._version == self._version:
                path, commons, pos = after._walk
            else:
                path, commons, pos = self._walk(packed)
        else:
            packed = pack(tokens)
            path, commons, pos = self._walk(packed)
        bit = 1 << worker
        node = self.root
        touched: list[_Node] = []
        for child, n in zip(path, commons):
            if n < len(child.key):
                child = self._split(child, n)
            if not child.mask & bit:
                child.mask |= bit
                self.worker_tokens[worker] += len(child.key) // _T
                self._version += 1
            touched.append(child)
            node = child
        if pos < len(packed):
            leaf = _Node(packed[pos:], node, bit)
            node.children[packed[pos : pos + _T]] = leaf
            added = len(leaf.key) // _T
            self.total_tokens += added
            self.worker_tokens[worker] += added
            self._version += 1
            self._lru[leaf] = None  # first: the touch below moves its ancestors after it
        self._touch(touched)
        self._enforce_capacity()

    def prune(self, tokens: Sequence[int], worker: int) -> None:
        """``worker`` no longer caches ``tokens`` in full: it keeps at most ``tokens[:-1]``.

        Every longer path through that point is dropped for ``worker`` too. An
        unknown prefix is a no-op (the index may already have forgotten it).
        """
        self._check(worker)
        if not len(tokens):
            return
        packed = pack(tokens)
        cut = len(packed) - _T  # the worker keeps packed[:cut]
        node, pos = self.root, 0
        while True:
            child = node.children.get(packed[pos : pos + _T])
            if child is None:
                return
            n = _common_len(child.key, packed, pos)
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
                child = child.children[packed[cut : cut + _T]]
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

    def _walk(self, packed: bytes) -> tuple[list[_Node], list[int], int]:
        """Nodes along ``packed``, bytes matched in each, total bytes matched."""
        node, pos = self.root, 0
        path: list[_Node] = []
        commons: list[int] = []
        end = len(packed)
        while pos < end:
            child = node.children.get(packed[pos : pos + _T])
            if child is None:
                break
            n = _common_len(child.key, packed, pos)
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
        """Split ``node``'s edge after ``at`` bytes (whole tokens); returns the new upper node."""
        parent = node.parent
        assert parent is not None and 0 < at < len(node.key) and at % _T == 0
        self._version += 1
        upper = _Node(node.key[:at], parent, node.mask)
        parent.children[upper.key[:_T]] = upper
        node.key = node.key[at:]
        node.parent = upper
        upper.children[node.key[:_T]] = node
        # The upper part is an ancestor: it must sit after node in LRU order.
        self._lru[upper] = None
        self._lru.move_to_end(upper)
        return upper

    def _touch(self, path: list[_Node]) -> None:
        move = self._lru.move_to_end  # every linked node is in the LRU
        for node in reversed(path):
            move(node)

    def _clear_subtree(self, top: _Node, bit: int) -> None:
        if top.mask & bit:
            self._removals.note(top)
        worker = bit.bit_length() - 1
        stack = [top]
        while stack:
            node = stack.pop()
            if not node.mask & bit:
                continue
            node.mask &= ~bit
            self._version += 1
            self.worker_tokens[worker] -= len(node.key) // _T
            if node.mask == 0:
                # Descendants hold at most ``bit``: _remove uncounts them.
                self._remove(node)
            else:
                stack.extend(node.children.values())

    def _remove(self, top: _Node) -> None:
        """Unlink ``top`` and its whole subtree."""
        parent = top.parent
        assert parent is not None
        del parent.children[top.key[:_T]]
        self._version += 1
        stack = [top]
        while stack:
            node = stack.pop()
            tokens = len(node.key) // _T
            self.total_tokens -= tokens
            holders = self._holders.get(node.mask)
            if holders is None:
                holders = self._holders[node.mask] = workers_of(node.mask)
            for w in holders:
                self.worker_tokens[w] -= tokens
            self._lru.pop(node, None)
            stack.extend(node.children.values())

    def _enforce_capacity(self) -> None:
        lru = self._lru
        while self.total_tokens > self.capacity_tokens and lru:
            oldest = next(iter(lru))
            self._removals.note(oldest)
            self._remove(oldest)

    def iter_paths(self) -> Iterator[tuple[list[int], int]]:
        """Every (full token path, mask) of the leaves: for tests and debugging."""
        stack: list[tuple[_Node, bytes]] = [(c, c.key) for c in self.root.children.values()]
        while stack:
            node, path = stack.pop()
            if not node.children:
                yield unpack(path), node.mask
            for c in node.children.values():
                stack.append((c, path + c.key))
