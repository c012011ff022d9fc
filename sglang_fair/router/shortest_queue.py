"""Shortest queue: the live worker with the fewest in-flight requests."""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.router.base import Router


class ShortestQueueRouter(Router):
    name = "shortest_queue"

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int:
        return self._record(rid, client, self.least_loaded(self.live_workers()), len(tokens))
