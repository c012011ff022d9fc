"""Which data-parallel workers are alive, and which went quiet: the controller's watch over them.

How a dead worker shows depends on the backend:

* processes (SGLang's default): each scheduler announces its pid over the
  report channel; a worker whose scheduler process exited (or is a zombie) is
  dead. The pids are this node's: the process backend runs every scheduler here.
* Ray (``--use-ray``): each actor's event-loop ref; a loop that returned means
  the actor is gone (or crashed).

Both also warn, in the log, about workers that never announced themselves
(their reports cannot reach the router) and workers with requests in flight
that stopped reporting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import psutil

logger = logging.getLogger(__name__)

SILENT_WORKER_WARN_S = 60.0
HELLO_WAIT_S = 30.0  # schedulers announce themselves while the controller starts


class WorkerLiveness:
    """Reports heard per worker; ``dead_ranks`` is the backend's."""

    def __init__(self, num_workers: int, now: float) -> None:
        self.worker_pids: dict[int, set[int]] = {}  # rank -> scheduler pids, from their hello
        self.last_report = [now] * num_workers
        self.last_warned = [0.0] * num_workers
        self.started = now
        self.unannounced_warned = False

    def heard_from(self, rank: int, now: float) -> None:
        self.last_report[rank] = now

    def hello(self, rank: int, pid: int) -> None:
        pids = self.worker_pids.setdefault(rank, set())
        if pid not in pids:
            pids.add(pid)
            logger.info("sglang-fair router: worker %d is process %d", rank, pid)

    def dead_ranks(self) -> list[int]:
        raise NotImplementedError

    def warn_quiet(self, alive: Sequence[bool], in_flight: Sequence[int], now: float, feedback: str | None) -> None:
        """Log workers that never announced themselves, and busy workers that stopped reporting."""
        missing = [r for r in range(len(alive)) if r not in self.worker_pids]
        if missing and not self.unannounced_warned and now - self.started > HELLO_WAIT_S:
            self.unannounced_warned = True
            logger.warning(
                "sglang-fair router: workers %s never reported (side channel %s unreachable from their node? "
                "see SGLANG_FAIR_ROUTER_HOST): their queue sizes only grow", missing, feedback,
            )
        for rank, is_alive in enumerate(alive):
            silent = now - self.last_report[rank]
            if is_alive and in_flight[rank] > 0 and silent > SILENT_WORKER_WARN_S:
                if now - self.last_warned[rank] > SILENT_WORKER_WARN_S:
                    self.last_warned[rank] = now
                    logger.warning(
                        "sglang-fair router: worker %d has %d requests in flight and has not run a batch for %.0f s",
                        rank, in_flight[rank], silent,
                    )


class ProcessLiveness(WorkerLiveness):
    """Schedulers are processes of this node; ``procs`` gives the controller's children."""

    def __init__(self, num_workers: int, now: float, procs: Callable[[], Sequence]) -> None:
        super().__init__(num_workers, now)
        self.procs = procs

    def dead_ranks(self) -> list[int]:
        return [rank for rank, pids in self.worker_pids.items() if not all(self._pid_alive(pid) for pid in pids)]

    def _pid_alive(self, pid: int) -> bool:
        for proc in self.procs():
            if proc is not None and proc.pid == pid:
                return proc.is_alive()  # our child: also reaps it
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False


class RayLiveness(WorkerLiveness):
    """Schedulers are Ray actors; ``loops`` holds each rank's event-loop refs (``loops_per_rank``)."""

    def __init__(self, num_workers: int, now: float, loops: list[list]) -> None:
        super().__init__(num_workers, now)
        self.loops = loops

    def dead_ranks(self) -> list[int]:
        import ray

        return [rank for rank, refs in enumerate(self.loops) if ray.wait(refs, num_returns=len(refs), timeout=0)[0]]


def loops_per_rank(refs: list, num_ranks: int) -> list[list]:
    """Split the actors' event loop refs by rank: SGLang launches rank by rank, tp x pp actors each."""
    per_rank = len(refs) // num_ranks
    return [refs[r * per_rank:(r + 1) * per_rank] for r in range(num_ranks)]
