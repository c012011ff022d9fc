"""``AdmissionWalk`` on a plain list, read the way SGLang's admission loop reads it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed, AdmissionWalk


def _queue(names: str) -> list:
    return [SimpleNamespace(rid=name) for name in names]


def _walk(queue: list, offered: str) -> AdmissionWalk:
    by_rid = {req.rid: req for req in queue}
    return AdmissionWalk(queue, list(queue), (by_rid[rid] for rid in offered))


def _loop(walk: AdmissionWalk, skip: str = "", slots: int = 99) -> list[str]:
    """``for req in queue``, as SGLang's loop with our adder: passes over ``skip``, admits what
    ``offer`` accepts, stops after ``slots`` or when the walk is over (the adder answers OTHER)."""
    admitted = []
    for req in walk.queue:
        if len(admitted) == slots:
            break
        if req.rid in skip:
            continue
        if walk.offer(req):
            admitted.append(req.rid)
            walk.advance()
        if walk.current is None:
            break
    return admitted


def test_the_loop_reads_the_policys_candidates_in_the_policys_order():
    queue = _queue("abcdef")
    walk = _walk(queue, "eca")
    assert _loop(walk) == ["e", "c", "a"]
    assert [r.rid for r in queue] == ["e", "c", "a", "b", "d", "f"]  # the others kept their order


def test_a_candidate_the_loop_passes_over_is_not_admitted_and_the_walk_goes_on():
    queue = _queue("abcdef")
    walk = _walk(queue, "ecfa")
    # The loop skips e (say, its LoRA cannot load) and reaches a, which is refused: the policy's next
    # candidate is c, put right after it. a, read and refused, waits for the next pass.
    assert _loop(walk, skip="e") == ["c", "f"]
    assert [r.rid for r in queue][:4] == ["e", "a", "c", "f"]


def test_a_candidate_already_passed_waits_for_the_next_pass():
    queue = _queue("abcd")
    walk = _walk(queue, "bca")  # a comes after the loop has read past it
    assert _loop(walk, skip="b") == ["c"]
    assert walk.current is None


def test_restore_order_puts_waiting_candidates_back_and_keeps_new_arrivals_last():
    queue = _queue("abcdef")
    walk = _walk(queue, "fdb")
    assert _loop(walk, slots=1) == ["f"]
    assert [r.rid for r in queue][:2] == ["f", "d"]  # d moved forward for a turn it never got
    after = [r for r in queue if r.rid != "f"] + _queue("x")  # SGLang: admitted out, preempted appended
    walk.restore_order(after)
    assert [r.rid for r in after] == ["a", "b", "c", "d", "e", "x"]


def test_a_request_that_is_not_in_the_queue_stops_the_scheduler():
    walk = _walk(_queue("abc"), "b")
    with pytest.raises(AdmissionBypassed, match="'z'"):
        walk.offer(SimpleNamespace(rid="z"))
