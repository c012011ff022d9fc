"""Which paths of the global radix index lost a worker, for a router that keeps matches.

A router holding matches of prompts (d2lpm_global) learns from these which
ones an eviction may have shortened, instead of walking all of them again.
Only removals are noted, never lookups or inserts, so the index's hot paths
pay nothing for it.
"""

from __future__ import annotations

from typing import Protocol


class PathNode(Protocol):
    """A radix index node as seen here: its edge (packed tokens) and its parent."""

    key: bytes
    parent: PathNode | None


class RemovalWatch:
    """Packed prefixes of the paths that lost a worker (pruned, dropped with their worker,
    or trimmed past capacity), up to a watched length, each with the fewest bytes above a
    removed edge on such a path; nothing is kept until ``watch``."""

    __slots__ = ("prefix_bytes", "removed")

    def __init__(self) -> None:
        self.prefix_bytes = 0  # 0: nobody watches
        self.removed: dict[bytes, int] = {}

    def watch(self, prefix_bytes: int) -> None:
        self.prefix_bytes = prefix_bytes

    def take(self) -> dict[bytes, int]:
        out, self.removed = self.removed, {}
        return out

    def note(self, top: PathNode) -> None:
        """``top``'s edge, and so everything under it, loses a worker: note its path."""
        if not self.prefix_bytes:
            return
        path = []
        node: PathNode | None = top
        while node is not None:
            path.append(node)
            node = node.parent
        above = sum(len(node.key) for node in path[1:])  # a match no longer than this keeps all it had
        prefix, want = [], self.prefix_bytes
        for node in reversed(path):  # root first; only the watched length is copied
            prefix.append(node.key[:want])
            want -= len(prefix[-1])
            if not want:
                break
        key = b"".join(prefix)
        self.removed[key] = min(above, self.removed.get(key, above))
