"""What a late-binding router knows of the requests it placed, per worker, from the workers' reports.

Placement, admission into a batch, the first output token and completion
are reported (``Router.on_admitted``, ``on_progress``, ``on_finish``); from
them each worker's load reads as the peers' rules read theirs:

* ``waiting[w]``: placed on ``w`` and not yet admitted, the worker's waiting
  queue (what a gateway scrapes as the engine's queued requests);
* ``prefill_tokens[w]``: uncached prompt tokens of the requests on ``w`` whose
  first token has not come, queued or prefilling (Dynamo's active prefill tokens);
* ``kv_tokens[w]``: the uncached prompt tokens and the output so far of the
  requests ``w`` is running, the KV cache they hold beyond the cached
  prefixes they share (those are left out: an under-estimate by each shared
  prefix once; counting every request's whole prompt over-counts a prefix
  shared by a batch of sixteen sixteen times).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Placed:
    worker: int
    prompt: int
    uncached: int
    admitted: bool = False
    output: int = 0
    prefilling: bool = True


class Placements:
    def __init__(self, num_workers: int) -> None:
        self.waiting = [0] * num_workers
        self.prefill_tokens = [0] * num_workers
        self.kv_tokens = [0] * num_workers
        self._placed: dict[str, _Placed] = {}

    def placed(self, rid: str, worker: int, prompt: int, uncached: int) -> None:
        self._placed[rid] = _Placed(worker, prompt, uncached)
        self.waiting[worker] += 1
        self.prefill_tokens[worker] += uncached

    def admitted(self, rid: str, cached_tokens: int | None = None) -> bool:
        """``rid`` entered a batch (``cached_tokens`` of its prompt found cached, if reported).
        True if this changed a worker's waiting queue (a re-admission after a retraction does not)."""
        p = self._placed.get(rid)
        if p is None or p.admitted:
            return False
        if cached_tokens is not None:  # what the worker really computes
            uncached = max(0, p.prompt - int(cached_tokens))
            if p.prefilling:
                self.prefill_tokens[p.worker] += uncached - p.uncached
            p.uncached = uncached
        self._admit(p)
        return True

    def progress(self, rid: str, output_tokens: int) -> bool:
        """``rid`` has produced ``output_tokens`` so far; True when that ended its prefill."""
        p = self._placed.get(rid)
        if p is None:
            return False
        if not p.admitted:  # the admission report was lost or overtaken
            self._admit(p)
        grown = max(0, int(output_tokens) - p.output)
        p.output += grown
        self.kv_tokens[p.worker] += grown
        if p.prefilling and p.output > 0:
            p.prefilling = False
            self.prefill_tokens[p.worker] -= p.uncached
            return True
        return False

    def finished(self, rid: str) -> None:
        p = self._placed.pop(rid, None)
        if p is None:
            return
        if not p.admitted:
            self.waiting[p.worker] -= 1
        else:
            self.kv_tokens[p.worker] -= p.uncached + p.output
        if p.prefilling:
            self.prefill_tokens[p.worker] -= p.uncached

    def drop_worker(self, worker: int) -> None:
        for rid in [rid for rid, p in self._placed.items() if p.worker == worker]:
            del self._placed[rid]
        self.waiting[worker] = self.prefill_tokens[worker] = self.kv_tokens[worker] = 0

    def _admit(self, p: _Placed) -> None:
        p.admitted = True
        self.waiting[p.worker] -= 1
        self.kv_tokens[p.worker] += p.uncached + p.output
