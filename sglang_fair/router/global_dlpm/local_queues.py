"""What each worker has been sent: its local queue (dispatched, not yet admitted), its running
requests near their last token, and its work in flight as Preble estimates it."""

from __future__ import annotations

from sglang_fair.router.global_dlpm.options import GlobalDLPMOptions


class LocalQueues:
    """Per worker: the requests dispatched and not admitted (rid -> uncached tokens charged), their
    uncached tokens, the running requests within ``finishing_tokens`` of their max_new, and the load
    (uncached prompt + w_q x max output of every request in flight)."""

    def __init__(self, options: GlobalDLPMOptions, queue_sizes: list[int], alive: list[bool]) -> None:
        n = len(queue_sizes)
        self.options = options
        self.queue_sizes, self.alive = queue_sizes, alive  # the router's, kept current by it
        self.local: list[dict[str, int]] = [{} for _ in range(n)]
        self.tokens = [0] * n
        self.load = [0.0] * n
        self.finishing: list[set[str]] = [set() for _ in range(n)]
        self._max_new: dict[str, int] = {}
        self._work: dict[str, float] = {}

    # ---- room -----------------------------------------------------------------------

    def rooms(self) -> list[int]:
        """The live workers whose local queue holds fewer than ``limit`` requests and
        ``local_queue_tokens`` uncached tokens, ascending: the placement loop asks after each placement."""
        alive, tokens, cap, limit = self.alive, self.tokens, self.options.local_queue_tokens, self.limit
        return [w for w, local in enumerate(self.local) if alive[w] and tokens[w] < cap and len(local) < limit(w)]

    def newcomer_rooms(self) -> list[int]:
        """The live workers keeping the one place a full local queue keeps for a client with nothing
        dispatched (at most ``limit`` requests, whatever their tokens), ascending."""
        alive, limit = self.alive, self.limit
        return [w for w, local in enumerate(self.local) if alive[w] and len(local) <= limit(w)]

    def limit(self, worker: int) -> int:
        """R, or the worker's free running slots, those about to free (``finishing``) and
        ``queue_beyond_free_slots`` if fewer (when ``worker_max_running`` is known). Counting
        free slots, not only a full batch: a batch that finishes together frees every slot at
        once, and a limit applied only once the next batch is full would find its local queue
        refilled to R meanwhile; counting those about to free, its successors are there when it
        does, and the worker admits them in one prefill instead of one per dispatch round."""
        free = self.free_slots(worker)
        if free is None:
            return self.options.local_queue_requests
        return min(self.options.local_queue_requests,
                   free + len(self.finishing[worker]) + self.options.queue_beyond_free_slots)

    def free_slots(self, worker: int) -> int | None:
        """Running slots the worker has free (None without ``worker_max_running``)."""
        if self.options.worker_max_running is None:
            return None
        running = self.queue_sizes[worker] - len(self.local[worker])  # dispatched, not finished or local
        return max(0, self.options.worker_max_running - running)

    # ---- a request's way through -------------------------------------------------------

    def dispatched(self, rid: str, worker: int, uncached: int, max_new: int) -> None:
        self.local[worker][rid] = uncached
        self.tokens[worker] += uncached
        self._max_new[rid] = max_new
        work = self.options.input_weight * uncached + self.options.output_weight * max_new
        self._work[rid] = work
        self.load[worker] += work

    def leave(self, rid: str, worker: int) -> bool:
        """``rid`` left ``worker``'s local queue (admitted, or finished before); whether it was there."""
        tokens = self.local[worker].pop(rid, None)
        if tokens is None:
            return False
        self.tokens[worker] -= tokens
        return True

    def note_finishing(self, rid: str, worker: int, output_tokens: int) -> bool:
        """Count ``rid``, running on ``worker``, as about to free its slot if it is; whether that is new."""
        if rid in self.finishing[worker]:
            return False
        limit = self.options.finishing_tokens
        if self._max_new.get(rid, limit + 1) - output_tokens <= limit:
            self.finishing[worker].add(rid)
            return True
        return False

    def finished(self, rid: str, worker: int) -> None:
        self.finishing[worker].discard(rid)
        self._max_new.pop(rid, None)
        self.load[worker] = max(0.0, self.load[worker] - self._work.pop(rid, 0.0))
