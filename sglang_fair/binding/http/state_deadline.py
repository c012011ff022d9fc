"""Info and admin calls answer within a deadline, whatever the ranks do.

``/get_server_info``, ``/server_info``, ``/fair/settings`` (read and change)
and ``/flush_cache`` wait, in SGLang's tokenizer, for one answer per
data-parallel rank, one call of a kind at a time (``FanOutCommunicator``): a
rank that never answers would hold that call, and every later call of the
kind, for good. The controller answers for ranks it knows are dead
(``controller/dead_rank_answers.py``); this is the bound on everything else
(a rank stuck in a long step, a death not yet noticed, a lost message). Once a
call has waited ``deadline_s()`` (``SGLANG_FAIR_STATE_DEADLINE_S``, 10 s by
default), the ranks that did not answer are answered for, with a failure that
says so, and the call returns what the others said.

Only these quick kinds are bounded: weight updates, profiling and the like may
take minutes on a GPU and keep SGLang's own wait (a dead rank's share of those
is answered by the controller).

A rank's answer that comes after its deadline is taken and dropped before
the next call of its kind is sent (``BoundedCall``), so that it cannot count
for that call.

Hook: ``answer_state_calls_in_time`` AFTER
``TokenizerControlMixin.init_communicators``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sglang_fair.binding.common import settings, sglang_private, worker_status
from sglang_fair.binding.common.rank_answers import NO_ANSWER, failed_answer

logger = logging.getLogger(__name__)

# The communicators (``<name>_communicator`` on the tokenizer manager) whose calls are bounded.
BOUNDED = ("get_internal_state", "set_internal_state", "flush_cache")


def answer_state_calls_in_time(result: Any, manager: Any, *args: Any, **kwargs: Any) -> Any:
    """AFTER ``TokenizerControlMixin.init_communicators``: bound the info and admin communicators."""
    from sglang.srt.managers import io_struct

    answers = {"get_internal_state": io_struct.GetInternalStateReqOutput,
               "set_internal_state": io_struct.SetInternalStateReqOutput,
               "flush_cache": io_struct.FlushCacheReqOutput}
    for name in BOUNDED:
        inner = sglang_private.communicator(manager, name)
        if inner is not None and not isinstance(inner, BoundedCall):
            sglang_private.replace_communicator(manager, name, BoundedCall(inner, name, answers[name],
                                                                           settings.state_deadline_s()))
    return result


class BoundedCall:
    """A ``FanOutCommunicator`` whose calls end within ``deadline_s``.

    SGLang registered the communicator's own ``handle_recv`` for its answers, so answers
    still reach it; this only ends a call that waited too long, by answering for the ranks
    that did not (the communicator then returns, resets and lets the next call go). Those
    ranks still owe an answer: a rank that was only slow sends it later, and were a call in
    flight then, it would count for that call. So before the next call is sent, the owed
    answers are collected and dropped, for at most a fifth of the deadline (so a call ends
    within 1.3 x the deadline at worst: the drain, the deadline, the clock's step); owed answers that never come are forgiven once a worker is known dead
    (the controller then answers for it, and a dead rank owes nothing more)."""

    def __init__(self, inner: Any, name: str, answer_type: type, deadline_s: float) -> None:
        self.inner = inner
        self.name = name
        self.answer_type = answer_type
        self.deadline_s = deadline_s
        self.owed = 0  # answers the ranks still owe for calls ended at their deadline
        self._waiting: tuple[asyncio.Event, float] | None = None  # the call in flight, and since when

    async def __call__(self, obj: Any) -> Any:
        if self.owed:
            await self.drain_owed(self.deadline_s / 5)
        call = asyncio.ensure_future(self.inner(obj))
        try:
            while True:
                done, _ = await asyncio.wait({call}, timeout=self.deadline_s / 10)
                if done:
                    return call.result()
                self.end_if_overdue(time.monotonic())
        except asyncio.CancelledError:  # the caller went away (a client hung up): so does its call
            call.cancel()
            raise

    async def drain_owed(self, timeout_s: float) -> None:
        """Take the owed answers as they come, with no call in flight, for at most ``timeout_s``."""
        inner = self.inner
        async with sglang_private.queueing_lock(inner):  # no call of the kind starts meanwhile
            if self.owed <= 0:
                return
            collected: list = []
            event = asyncio.Event()
            sglang_private.set_call_in_flight(inner, event, collected, self.owed)
            try:
                await asyncio.wait_for(event.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
            finally:
                sglang_private.set_call_in_flight(inner, None, None, None)
            self.owed -= len(collected)
            if self.owed > 0 and (worker_status.read_workers() or {}).get("dead"):
                self.owed = 0  # the controller answered for the dead rank's latest; nothing more will come

    def end_if_overdue(self, now: float) -> bool:
        """End the call in flight if it has waited ``deadline_s``; whether it was ended."""
        event, values, fan_out = sglang_private.call_in_flight(self.inner)
        if event is None or values is None or fan_out is None or event.is_set():
            self._waiting = None
            return False
        if self._waiting is None or self._waiting[0] is not event:
            self._waiting = (event, now)  # a call this has not seen yet: its clock starts
            return False
        if now - self._waiting[1] < self.deadline_s:
            return False
        missing = fan_out - len(values)
        message = f"{missing} of {fan_out} data-parallel ranks did not answer within {self.deadline_s:g} s"
        logger.warning("sglang-fair: %s call: %s; answering with the others'", self.name, message)
        filler = failed_answer(self.answer_type, message, {NO_ANSWER: True, "error": message})
        values.extend(filler for _ in range(missing))
        self.owed += missing
        event.set()
        self._waiting = None
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
