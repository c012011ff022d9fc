"""The order DLPM's walk reads candidates in: longest prefix match first, sorted only as far as read."""

from __future__ import annotations

import heapq
from collections.abc import Container, Iterable, Iterator

from sglang_fair.core.requests import TrackedRequest
from sglang_fair.router.global_dlpm.held import HeldRequest, Ranked


class InOrder:
    """The requests of ``Ranked`` tuples, taken from an iterator that yields them in order as far as
    read (a placement usually takes one of the first few), and kept: DLPM's walk may read the
    order again."""

    def __init__(self, ranked: Iterator[Ranked]) -> None:
        self._ranked = ranked
        self._read: list[TrackedRequest] = []

    @classmethod
    def of(cls, ranked: list[Ranked]) -> InOrder:
        """The tuples of an unordered list, sorted only as far as read."""
        heapq.heapify(ranked)
        return cls(_popped(ranked))

    @classmethod
    def in_room(cls, ranked: Iterable[Ranked], room: int, clients: Container[str]) -> InOrder:
        """The requests of ``clients`` among sorted candidates (ranked for ``room``), each with its
        room set to ``room`` as it is read."""
        return cls(_in_room(ranked, room, clients))

    def __iter__(self) -> Iterator[TrackedRequest]:
        i = 0
        while True:
            if i == len(self._read):  # past what any pass has read: take one more
                following = next(self._ranked, None)
                if following is None:
                    return
                self._read.append(following[-1].tracked)
            yield self._read[i]
            i += 1


def _popped(heap: list[Ranked]) -> Iterator[Ranked]:
    while heap:
        yield heapq.heappop(heap)


def _in_room(ranked: Iterable[Ranked], room: int, clients: Container[str]) -> Iterator[Ranked]:
    for item in ranked:
        held: HeldRequest = item[-1]
        if held.tracked.client in clients:
            held.room = room
            yield item
