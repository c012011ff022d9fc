"""The controller answers the tokenizer's control messages for workers that are dead.

The tokenizer waits for one answer per rank to each control message
(``common/rank_answers.py``), one call of a kind at a time. SGLang's
controller forwards a control message to the live workers only, so:

* a message that arrives once a worker is known dead is answered for it here,
  at once (``forwarded``);
* a message forwarded to a worker that then dies before answering would wait
  for good, and every later call of its kind behind it: when the controller
  declares a worker dead it answers, for it, the latest message of each kind
  it had forwarded there (``died``).

The worker may have answered that latest message before it died; the extra
answer then finds no call waiting and the tokenizer drops it (SGLang's
``FanOutCommunicator.handle_recv``), unless a new call of the same kind was
started in the moment between the death being noticed and the extra answer
reaching the tokenizer. Counting one answer too many there ends that call
early, which is the lesser harm next to a call that never ends; the
tokenizer's deadline (``http/state_deadline.py``) bounds the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.binding.common.rank_answers import failed_answer, output_type


class DeadRankAnswers:
    """Which control message of each kind went last to each worker, and the answers a dead one owes."""

    def __init__(self, num_workers: int) -> None:
        self.latest: list[dict[type, object]] = [{} for _ in range(num_workers)]  # rank -> answer kind -> request

    def forwarded(self, request: object, alive: Sequence[bool]) -> list[object]:
        """``request`` went to every live worker: remember it for them; the answers owed for the dead ones."""
        kind = output_type(request)
        if kind is None:
            return []
        owed = []
        for rank, is_alive in enumerate(alive):
            if is_alive:
                self.latest[rank][kind] = request
            else:
                owed += self._answer(kind, request, rank)
        return owed

    def died(self, rank: int) -> list[object]:
        """The answers worker ``rank`` owes for the latest message of each kind it was sent."""
        owed = [answer for kind, request in self.latest[rank].items() for answer in self._answer(kind, request, rank)]
        self.latest[rank].clear()
        return owed

    @staticmethod
    def _answer(kind: type, request: object, rank: int) -> list[object]:
        message = f"data-parallel worker {rank} died"
        answer = failed_answer(kind, message, {"dp_rank": rank, "dead_worker": True})
        if answer is None:
            return []
        reply_to = getattr(request, "http_worker_ipc", None)
        if reply_to is not None:  # several HTTP workers: the one that asked
            answer.http_worker_ipc = reply_to
        return [answer]
