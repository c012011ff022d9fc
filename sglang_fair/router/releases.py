"""The requests a holding router has placed and not yet handed to its backend."""

from __future__ import annotations


class Releases:
    """Placed requests in placement order: the one being routed is claimed by ``route``'s caller
    at once, the others are collected with ``take`` (the router's ``take_released``)."""

    def __init__(self) -> None:
        self._worker_of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._worker_of)

    def add(self, rid: str, worker: int) -> None:
        self._worker_of[rid] = worker

    def claim(self, rid: str) -> int | None:
        """``rid``'s worker if it was placed and not yet taken (it is then no longer pending)."""
        return self._worker_of.pop(rid, None)

    def take(self) -> list[tuple[str, int]]:
        """Every pending placement, oldest first; none pending afterwards."""
        out = list(self._worker_of.items())
        self._worker_of.clear()
        return out
