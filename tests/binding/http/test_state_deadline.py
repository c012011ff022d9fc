"""Info and admin calls end within their deadline, on SGLang's real ``FanOutCommunicator``."""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.engine

communicator = pytest.importorskip("sglang.srt.managers.communicator")

from sglang.srt.managers.io_struct import GetInternalStateReqOutput, SetInternalStateReqOutput  # noqa: E402

from sglang_fair.binding.common import settings  # noqa: E402
from sglang_fair.binding.common.rank_answers import NO_ANSWER  # noqa: E402
from sglang_fair.binding.http.state_deadline import BoundedCall, answer_state_calls_in_time  # noqa: E402

DEADLINE_S = 0.3


def _bounded(fan_out: int, sent: list) -> tuple[BoundedCall, communicator.FanOutCommunicator]:
    inner = communicator.FanOutCommunicator(sent.append, fan_out, "queueing")
    return BoundedCall(inner, "get_internal_state", GetInternalStateReqOutput, DEADLINE_S), inner


def test_a_call_every_rank_answers_returns_their_answers() -> None:
    async def run() -> list:
        sent: list = []
        bounded, inner = _bounded(2, sent)
        call = asyncio.ensure_future(bounded("ask"))
        await asyncio.sleep(0.01)
        for rank in range(2):
            inner.handle_recv(GetInternalStateReqOutput(internal_state={"dp_rank": rank}))
        return [sent, await call]

    sent, answers = asyncio.run(run())
    assert sent == ["ask"] and [a.internal_state for a in answers] == [{"dp_rank": 0}, {"dp_rank": 1}]


def test_a_silent_rank_is_answered_for_at_the_deadline_and_the_next_call_goes() -> None:
    async def run() -> tuple[list, float, list]:
        loop = asyncio.get_running_loop()
        bounded, inner = _bounded(2, [])
        started = loop.time()
        first = asyncio.ensure_future(bounded("ask"))
        second = asyncio.ensure_future(bounded("ask again"))  # queued behind the first
        await asyncio.sleep(0.01)
        inner.handle_recv(GetInternalStateReqOutput(internal_state={"dp_rank": 0}))  # rank 1 never answers
        answers = await first
        waited = loop.time() - started
        await asyncio.sleep(0.01)
        for rank in range(2):  # the second call is in flight now: both ranks answer it
            inner.handle_recv(GetInternalStateReqOutput(internal_state={"dp_rank": rank, "call": 2}))
        return answers, waited, await asyncio.wait_for(second, 5)

    answers, waited, later = asyncio.run(run())
    assert DEADLINE_S <= waited < 3 * DEADLINE_S
    assert answers[0].internal_state == {"dp_rank": 0}
    filler = answers[1].internal_state
    assert filler[NO_ANSWER] is True and "1 of 2 data-parallel ranks did not answer within 0.3 s" in filler["error"]
    assert [a.internal_state["call"] for a in later] == [2, 2]


def test_a_late_answer_is_dropped_not_counted_for_the_next_call() -> None:
    async def run() -> tuple[list, list, int]:
        bounded, inner = _bounded(2, [])
        first = asyncio.ensure_future(bounded("ask"))
        await asyncio.sleep(0.01)
        inner.handle_recv(GetInternalStateReqOutput(internal_state={"dp_rank": 0, "call": 1}))
        ended = await first  # rank 1 silent: ended at the deadline, rank 1 owes one answer
        owed = bounded.owed
        second = asyncio.ensure_future(bounded("ask again"))
        await asyncio.sleep(0.01)
        inner.handle_recv(GetInternalStateReqOutput(internal_state={"dp_rank": 1, "call": 1}))  # the late one
        await asyncio.sleep(0.01)
        for rank in range(2):
            inner.handle_recv(GetInternalStateReqOutput(internal_state={"dp_rank": rank, "call": 2}))
        return ended, await asyncio.wait_for(second, 5), owed

    ended, later, owed = asyncio.run(run())
    assert owed == 1 and ended[1].internal_state[NO_ANSWER]
    assert [(a.internal_state["dp_rank"], a.internal_state["call"]) for a in later] == [(0, 2), (1, 2)]


def test_owed_answers_that_never_come_hold_the_next_call_only_briefly() -> None:
    async def run() -> tuple[float, list]:
        loop = asyncio.get_running_loop()
        bounded, inner = _bounded(1, [])
        await bounded("ask")  # never answered: one owed
        started = loop.time()
        second = asyncio.ensure_future(bounded("ask again"))
        await asyncio.sleep(DEADLINE_S / 5 + 0.05)  # the drain gave up; the call is in flight
        inner.handle_recv(GetInternalStateReqOutput(internal_state={"dp_rank": 0, "call": 2}))
        return loop.time() - started, await asyncio.wait_for(second, 5)

    took, answers = asyncio.run(run())
    assert took < DEADLINE_S and [a.internal_state["call"] for a in answers] == [2]


def test_a_change_no_rank_confirms_reads_as_not_applied() -> None:
    async def run() -> list:
        inner = communicator.FanOutCommunicator(lambda obj: None, 3, "queueing")
        return await BoundedCall(inner, "set_internal_state", SetInternalStateReqOutput, DEADLINE_S)("change")

    assert [a.updated for a in asyncio.run(run())] == [False, False, False]


def test_the_hook_bounds_the_info_and_admin_communicators_only(monkeypatch) -> None:
    class Manager:
        pass

    manager = Manager()
    for name in ("get_internal_state", "set_internal_state", "flush_cache", "update_weights_from_tensor"):
        setattr(manager, f"{name}_communicator", communicator.FanOutCommunicator(lambda obj: None, 2))
    monkeypatch.setenv(settings.STATE_DEADLINE_ENV, "4.5")
    assert answer_state_calls_in_time("result", manager) == "result"
    assert answer_state_calls_in_time("again", manager) == "again"  # idempotent: never wrapped twice
    bounded = manager.get_internal_state_communicator
    assert isinstance(bounded, BoundedCall) and bounded.deadline_s == 4.5
    assert not isinstance(bounded.inner, BoundedCall)
    assert isinstance(manager.flush_cache_communicator, BoundedCall)
    assert not isinstance(manager.update_weights_from_tensor_communicator, BoundedCall)  # may take minutes
    bounded.set_fan_out(5)  # SGLang's own calls reach the communicator
    assert bounded.inner._fan_out == 5


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "nan", "inf"])
def test_a_bad_deadline_is_refused_naming_the_variable(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(settings.STATE_DEADLINE_ENV, raw)
    with pytest.raises(ValueError, match="SGLANG_FAIR_STATE_DEADLINE_S must be a positive number"):
        settings.state_deadline_s()
