"""The interface every data-parallel router implements, whatever the backend.

A backend (SGLang's DP controller, the simulator) calls ``route`` once per
request, in arrival order, and feeds back what the workers report
asynchronously: completions and cache evictions. A router never blocks and
never raises on stale or unknown feedback (a worker may report a request the
router no longer knows, after a restart).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence


class Router(ABC):
    name: str

    def __init__(self, num_workers: int) -> None:
        if num_workers < 1:
            raise ValueError(f"a router needs at least one worker, got {num_workers}")
        self.num_workers = num_workers
        # Requests dispatched and not yet finished, per worker (s_w in Algorithm 2).
        self.queue_sizes = [0] * num_workers
        self.alive = [True] * num_workers

    @abstractmethod
    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int:
        """Choose the worker for a new request and record the dispatch."""

    def on_finish(self, rid: str, worker: int, output_tokens: int) -> None:
        """A request finished (or was aborted) on ``worker``."""

    def on_cached(self, worker: int, tokens: Sequence[int]) -> None:
        """``worker`` now caches the prefix ``tokens`` (from KV events)."""

    def on_evicted(self, worker: int, tokens: Sequence[int]) -> None:
        """``worker`` evicted the prefix ``tokens`` from its cache."""

    def on_worker_down(self, worker: int) -> None:
        """Stop routing to ``worker`` and drop what is known of its cache."""
        self.alive[worker] = False
