"""``AdmissionWalk``: the fair policy's candidates, put where SGLang's admission loop reads next.

SGLang 0.5.23 admits in ``Scheduler._get_new_batch_prefill_raw``: it sorts the
waiting queue with ``SchedulePolicy.calc_priority``, builds a ``PrefillAdder``,
then runs ``for req in self.waiting_queue: ... adder.add_one_req(req)``. Both
ends of that are ours (``FairSchedulePolicy`` and ``FairPrefillAdder``), so the
walk needs nothing in between:

* ``calc_priority`` starts a walk: the policy's first candidate moves to the
  front of the (plain, sorted) waiting queue;
* ``add_one_req`` asks ``offer(req)`` whether ``req`` is the candidate; after
  the candidate's turn, ``advance`` moves the policy's next candidate to the
  place the loop reads next. Moves keep every other request's order.

A candidate the loop passes over for a reason of its own (LoRA, pooling mode,
storage prefetch) stays queued; the loop then hands over the request after
it, which is refused unless the policy offers it next (read and refused, it
waits for the next pass), and the next candidate goes right after it.
Whatever SGLang changes, only a request the policy offered is ever admitted:
``offer`` refuses the rest, and a request that is not in the queue after the
walk's place means the loop no longer reads this queue, which stops the
scheduler (``AdmissionBypassed``) rather than run it unfair.
"""

from __future__ import annotations

from collections.abc import Iterator

from sglang_fair.binding.common.version import installed_sglang


class AdmissionBypassed(RuntimeError):
    """SGLang admitted, or tried to, other than through the fair policy's walk."""


def bypassed(what: str) -> AdmissionBypassed:
    return AdmissionBypassed(f"sglang-fair: on SGLang {installed_sglang()}, {what}; the scheduler stops rather "
                             "than run unfair (supported releases: sglang_fair/binding/common/version.py)")


class AdmissionWalk:
    def __init__(self, queue: list, sorted_queue: list, candidates: Iterator) -> None:
        self.queue = queue  # SGLang's waiting queue, the list its admission loop iterates
        self._sorted = sorted_queue  # a copy of it as calc_priority left it
        self._candidates = candidates  # the policy's walk (Reqs), resumed after each candidate's turn
        self.current = None  # the candidate the loop reads next, at queue[self.index]
        self.index = 0
        self._moved_from = -1  # the furthest position a candidate was moved from: the queue is reordered up to it
        self._place(0, self._next_candidate(0))

    def offer(self, req) -> bool:
        """The loop asks to admit ``req``: True if it is the policy's current candidate.

        Otherwise the loop passed over the candidate and reached ``req``, which
        is refused unless it is the policy's next candidate; that one goes
        where the loop reads next.
        """
        if req is self.current:
            return True
        at = self._position(req, self.index)
        if at is None:
            raise bypassed(f"the admission loop asked to admit {req.rid!r}, which is not where the fair policy's "
                           "walk left the waiting queue: SGLang no longer admits from the queue calc_priority sorted")
        candidate = self._next_candidate(at)
        if candidate is req:
            self.current, self.index = req, at
            return True
        self._place(at + 1, candidate)
        return False

    def advance(self) -> None:
        """The current candidate had its turn (admitted or not): the policy's next one goes after it."""
        self._place(self.index + 1, self._next_candidate(self.index + 1))

    def _place(self, index: int, candidate) -> None:
        """Move ``candidate`` (None: the walk is over) to ``index``, where the loop reads next."""
        self.current, self.index = candidate, index
        if candidate is not None:
            at = self._position(candidate, index)
            if at != index:  # later in the queue: everything between keeps its order
                self.queue.insert(index, self.queue.pop(at))
                self._moved_from = max(self._moved_from, at)

    def restore_order(self, queue: list) -> None:
        """After the pass, on SGLang's queue (admitted requests gone, requeued ones appended):
        the requests still waiting go back to calc_priority's order.

        Only the front of the queue, up to the furthest move, was reordered; what
        is left of it still leads the queue, since SGLang only removes admitted ones.
        """
        if self._moved_from < 0:
            return
        front = self._sorted[:self._moved_from + 1]
        ids = {id(req) for req in front}
        end = 0
        while end < len(queue) and id(queue[end]) in ids:
            end += 1
        waiting = {id(req) for req in queue[:end]}
        queue[:end] = [req for req in front if id(req) in waiting]

    def _next_candidate(self, index: int):
        """The policy's next candidate the loop has not passed (at or after ``index``), or None.
        Candidates it passed stay queued for the next pass."""
        for candidate in self._candidates:
            if self._position(candidate, index) is not None:
                return candidate
        return None

    def _position(self, req, start: int) -> int | None:
        try:
            return self.queue.index(req, start)  # Req has no __eq__: identity, at C speed
        except ValueError:
            return None
