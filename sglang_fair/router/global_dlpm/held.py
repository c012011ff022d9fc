"""The requests the router holds, and how each client's candidates rank for each worker."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sglang_fair.core.requests import TrackedRequest
from sglang_fair.router.radix_index import PACKED_TOKEN_BYTES, Match, RadixIndex, common_prefix_len

PREFIX_KEY_TOKENS = 16  # requests sharing these first tokens likely share a longer prefix
_KEY_BYTES = PREFIX_KEY_TOKENS * PACKED_TOKEN_BYTES

# (-tokens cached on the worker, tokens lost by going there, arrival seq, request): sorted, the
# most cached first, then the least lost, then the oldest; the seq is unique, so tuples never
# compare the requests.
Ranked = tuple[int, int, int, "HeldRequest"]


@dataclass(eq=False)
class HeldRequest:
    """A request the router holds, and what the index says of it.

    ``lens``, ``length`` and ``holders`` (``Match.cached_lens``, ``length`` and
    ``workers``) rank it for placement. Matches shorter than ``PREFIX_KEY_TOKENS``
    count as none: a shared first token or two saves no prefill worth steering a
    request away from the least-loaded worker for, and only longer matches are
    kept current as follows. Dispatches of look-alikes (same first
    ``PREFIX_KEY_TOKENS`` tokens) update them by their common prefix: what a new
    lookup would add, for one compare of packed prompts instead of a tree walk.
    Evictions and the workers' cache reports on its path mark it ``stale``: it is
    looked up again before it is ranked.
    """

    tracked: TrackedRequest  # the cluster DLPM's record of it
    client: str  # as routed
    tokens: Sequence[int]  # as routed (the index's walks are reused for this object only)
    max_new: int
    match: Match  # for the charge at dispatch: reused if the index has not changed since
    key: int  # hash of the first tokens
    lens: list[int] = dataclasses.field(default_factory=list)
    length: int = 0
    holders: int = 0
    room: int = -1  # the worker the last placement pass chose for it
    stale: bool = False
    # In which of ``HeldRequests``' lists, as what (not in the repr: the lists hold every other candidate).
    ranked_as: list[tuple[list[Ranked], Ranked]] | None = dataclasses.field(default=None, repr=False)

    @property
    def rid(self) -> str:
        return self.tracked.rid

    def rank_by(self, match: Match, num_workers: int) -> None:
        """Take ``match`` (of this prompt, current) as what ranks the request."""
        self.match, self.stale = match, False
        self.lens = [n if n >= PREFIX_KEY_TOKENS else 0 for n in match.cached_lens(num_workers)]
        self.length, self.holders = (match.length, match.workers) if match.length >= PREFIX_KEY_TOKENS else (0, 0)

    def ranked(self, cached: int) -> Ranked:
        """How it ranks in a room caching ``cached`` of its tokens (``Ranked``)."""
        return -cached, self.length - cached, self.tracked.seq, self

    def sibling_placed(self, packed: bytes, worker: int) -> bool:
        """A request sharing this one's first tokens now caches ``packed`` (``pack``) on ``worker``;
        whether that changed how the request ranks."""
        mine = self.match.packed
        known = min(self.lens[worker], self.length)  # a common prefix no longer than this changes nothing
        if not packed.startswith(memoryview(mine)[:(known + 1) * PACKED_TOKEN_BYTES]):
            return False  # one compare: the usual case, a look-alike already cached there
        common = common_prefix_len(mine, packed)
        if common < PREFIX_KEY_TOKENS:
            return False
        changed = common > self.lens[worker] or common > self.length
        if common > self.lens[worker]:
            self.lens[worker] = common
        if common > self.length:
            self.length, self.holders = common, 1 << worker
        elif common == self.length:
            self.holders |= 1 << worker
        return changed


def prefix_key(packed: bytes) -> int:
    """The key of look-alikes: the hash of a packed prompt's first ``PREFIX_KEY_TOKENS`` tokens."""
    return hash(packed[:_KEY_BYTES])


class HeldRequests:
    """The held requests: per client oldest first, by id, by prefix key; and per worker, every
    client's candidates (its oldest ``candidates`` requests) in placement order for that worker.
    A backlog places one freed room at a time and most candidates are as they were, so the
    lists are kept sorted as candidates come, go and change, instead of ranked again per pass."""

    def __init__(self, num_workers: int, candidates: int) -> None:
        self.num_workers, self.candidates = num_workers, candidates
        self.by_client: dict[str, dict[str, HeldRequest]] = {}  # the DLPM's client id -> its requests
        self.by_rid: dict[str, HeldRequest] = {}
        self.by_key: dict[int, set[str]] = {}
        # Every candidate is ranked (``HeldRequest.ranked_as`` says in which lists, as what) or,
        # new or changed since, in ``_unranked`` until the next pass. Most candidates are cached
        # on one worker or two: for the others their key is (0, tokens cached anywhere, seq), the
        # same for every worker, so they are kept once, in ``_uncached``, and per worker only
        # the candidates it caches part of, in ``_cached``.
        self._uncached: list[Ranked] = []
        self._cached: list[list[Ranked]] = [[] for _ in range(num_workers)]
        self._unranked: set[HeldRequest] = set()

    def __bool__(self) -> bool:
        return bool(self.by_client)

    def __len__(self) -> int:
        return len(self.by_rid)

    def add(self, held: HeldRequest) -> None:
        client = held.tracked.client
        reqs = self.by_client.setdefault(client, {})
        reqs[held.rid] = held
        self.by_rid[held.rid] = held
        if len(reqs) <= self.candidates:  # one of the client's candidates
            self._unranked.add(held)
        self.by_key.setdefault(held.key, set()).add(held.rid)

    def remove(self, held: HeldRequest) -> None:
        client = held.tracked.client
        reqs = self.by_client[client]
        was_candidate = held.ranked_as is not None or held in self._unranked
        self._unrank(held)
        self._unranked.discard(held)
        del reqs[held.rid]
        if not reqs:
            del self.by_client[client]
        elif was_candidate and len(reqs) >= self.candidates:  # the next oldest becomes one
            self._unranked.add(next(itertools.islice(reqs.values(), self.candidates - 1, None)))
        del self.by_rid[held.rid]
        same = self.by_key[held.key]
        same.discard(held.rid)
        if not same:
            del self.by_key[held.key]

    def candidates_of(self, reqs: dict[str, HeldRequest], index: RadixIndex) -> Iterator[HeldRequest]:
        """A client's candidates, each ranked by a current match in ``index``."""
        n = self.num_workers
        for held in itertools.islice(reqs.values(), self.candidates):
            if held.stale:
                held.rank_by(index.refresh(held.match, touch=False), n)
            yield held

    def settle(self, index: RadixIndex, unless_fewer_than: int = 1) -> None:
        """Rank the candidates that came or changed since, into the workers' lists. Passes do it
        often, so that none pays for many (a refill makes every client's candidates readable at once)."""
        if len(self._unranked) >= unless_fewer_than:
            n = self.num_workers
            for held in self._unranked:
                if held.stale:
                    held.rank_by(index.refresh(held.match, touch=False), n)
                held.ranked_as = [(self._uncached, held.ranked(0))]
                held.ranked_as += [(self._cached[w], held.ranked(cached))
                                   for w, cached in enumerate(held.lens) if cached]
                for ranked, item in held.ranked_as:
                    bisect.insort(ranked, item)
            self._unranked.clear()

    def ranked_for(self, worker: int) -> Iterator[Ranked]:
        """Every client's candidates in placement order for ``worker``, as of the last ``settle``
        (the lists must not change while read)."""
        yield from self._cached[worker]
        for item in self._uncached:
            if not item[-1].lens[worker]:
                yield item

    def _unrank(self, held: HeldRequest) -> None:
        if held.ranked_as is not None:
            for ranked, item in held.ranked_as:
                del ranked[bisect.bisect_left(ranked, item)]
            held.ranked_as = None

    def _changed(self, held: HeldRequest) -> None:
        """What ranks a ranked candidate changed: out of the lists until the next pass reads them."""
        if held.ranked_as is not None:
            self._unrank(held)
            self._unranked.add(held)

    def mark_stale(self, prefixes: dict[bytes, int]) -> None:
        """Held requests whose prompt starts with one of ``prefixes`` (packed), matched longer
        than its tokens (``RadixIndex.take_removals``), must be looked up again."""
        for prefix, kept in prefixes.items():
            if len(prefix) == _KEY_BYTES:  # a look-alike family: found by its key
                for rid in self.by_key.get(hash(prefix), ()):
                    held = self.by_rid[rid]
                    if held.length > kept:
                        held.stale = True
                        self._changed(held)
                continue
            for held in self.by_rid.values():  # a short path: any held prompt may start with it
                if held.length > kept and held.match.packed.startswith(prefix):
                    held.stale = True
                    self._changed(held)

    def placed(self, key: int, packed: bytes, worker: int) -> None:
        """A prompt (``packed``, key ``key``) now cached on ``worker``: its held look-alikes may match longer there."""
        for rid in self.by_key.get(key, ()):
            held = self.by_rid[rid]
            if held.sibling_placed(packed, worker):  # the lists keep its old items until _changed removes them
                self._changed(held)
