"""Backlog (waiting for admission) and delivered service, as the theorems define them."""

import numpy as np
import pytest

from sglang_fair.metrics.backlog import (
    MissingAuditData,
    audit_problem,
    backlog_spans,
    max_backlogged_gap,
    service_steps,
)
from sglang_fair.metrics.service import ServiceWeights
from tests.metrics.helpers import admitted, rec

INPUT_ONLY = ServiceWeights(1, 0, "extend")


def test_a_waiting_request_is_backlog_and_a_running_one_is_not():
    # Sent at 1, admitted at 3, retracted at 5 and re-admitted at 7: waiting on [1, 3] and [5, 7].
    r = admitted("a", 1, 3, [(4, 1), (8, 5)], requeues=[(5, 7)])
    assert backlog_spans([r]) == [(1, 3), (5, 7)]
    # Overlapping and touching waits merge; a request admitted on arrival never waited.
    rs = [admitted("a", 0, 2), admitted("a", 1, 4), admitted("a", 4, 6), admitted("a", 9, 9)]
    assert backlog_spans(rs) == [(0, 6)]
    # Retracted and never re-admitted: waiting until it ended.
    assert backlog_spans([admitted("a", 0, 1, [(2, 1)], requeues=[(3, None)], t_done=5)]) == [(0, 1), (3, 5)]


def test_a_running_but_not_waiting_client_is_not_backlogged():
    # a's request runs on [0, 10] and produces a lot; b waits on [0, 5]. a never waits,
    # so no interval has both backlogged, however unequal the service.
    a = admitted("a", 0, 0, [(k, k * 100) for k in range(1, 11)], prompt=1000)
    b = admitted("b", 0, 5, [(6, 1)], prompt=10)
    gap = max_backlogged_gap([a, b], ServiceWeights(1, 2, "extend"))
    assert gap.value == 0 and gap.clients is None and gap.interval is None


def test_service_is_counted_as_delivered():
    # Extend (100 prompt - 40 cached) at admission, then 2 per output token as produced.
    r = admitted("a", 0, 2, [(3, 1), (4, 5)], prompt=100, cached=40)
    times, cum = service_steps([r], ServiceWeights(1, 2, "extend"))
    assert times.tolist() == [2, 3, 4] and cum.tolist() == [60, 62, 70]
    times, cum = service_steps([r], ServiceWeights(1, 2, "prompt"))  # a linear cost prices the whole prompt
    assert cum.tolist() == [100, 102, 110]
    # Events at the same instant are one step; failed requests deliver nothing.
    same = [admitted("a", 0, 2, [(3, 1)]), admitted("a", 0, 3, [(5, 1)]),
            admitted("a", 0, 1, [(2, 3)], error="timeout")]
    times, cum = service_steps(same, ServiceWeights(1, 1, "extend"))
    assert times.tolist() == [2, 3, 5] and np.allclose(cum, [10, 21, 22])


def test_exact_gap_and_its_interval():
    # Both clients wait on [0, 10]: a has a request waiting until 10, b until 12.
    # a gets 100 at t=1; b gets 40 at t=8; a's admission at t=10 ends the span and,
    # at that very instant, is not counted. D = W_a - W_b: 0, 100 (t=1), 60 (t=8) -> 100 over (0, 1].
    records = [admitted("a", 0, 1, prompt=100), admitted("a", 0, 10, prompt=100),
               admitted("b", 0, 8, prompt=40), admitted("b", 0, 12, prompt=40)]
    gap = max_backlogged_gap(records, INPUT_ONLY)
    assert gap.value == pytest.approx(100) and gap.clients == ("a", "b") and gap.interval == (0, 1)


def test_gap_in_the_other_direction_and_inside_the_interval():
    # b gets 300 at t=4, a gets 100 at t=2 and 250 at t=6: the largest gap is over (2, 4].
    records = [admitted("a", 0, 2, prompt=100), admitted("a", 0, 6, prompt=250), admitted("a", 0, 20, prompt=1),
               admitted("b", 0, 4, prompt=300), admitted("b", 0, 20, prompt=1)]
    gap = max_backlogged_gap(records, INPUT_ONLY)
    # D: 0, 100 (t=2), -200 (t=4), 50 (t=6) -> max - min = 300 over (2, 4].
    assert gap.value == pytest.approx(300) and gap.interval == (2, 4)


def test_gap_only_counts_intervals_where_both_wait():
    # a waits on [0, 2] and [6, 8]; b waits on [1, 7]: both wait on [1, 2] and [6, 7].
    # a's 250 output tokens at t=4 come while a only runs: they must not count.
    records = [admitted("a", 0, 2, [(4, 250)], prompt=10), admitted("a", 6, 8, prompt=10),
               admitted("b", 1, 7, prompt=30), admitted("b", 1, 6.5, prompt=20)]
    assert backlog_spans(records[:2]) == [(0, 2), (6, 8)]
    gap = max_backlogged_gap(records, ServiceWeights(1, 2, "extend"))
    # (1, 2): nothing strictly inside. (6, 7): b +20 at 6.5 -> 20 over (6, 6.5].
    assert gap.value == pytest.approx(20) and gap.interval == (6, 6.5)


def test_events_at_the_instant_a_span_ends_are_not_counted():
    # b's last waiting request is admitted at 5; in the same instant a is admitted
    # four times. The records cannot tell whether a's admissions came before b's
    # backlog ended, so they are not held against the bound.
    records = [admitted("b", 0, 5, prompt=10), admitted("b", 0, 2, prompt=10)]
    records += [admitted("a", 0, 5, prompt=1000) for _ in range(4)] + [admitted("a", 0, 9, prompt=1)]
    gap = max_backlogged_gap(records, INPUT_ONLY)
    assert gap.value == pytest.approx(10)  # only b's admission at t=2 is strictly inside (0, 5)


def test_records_without_audit_fields_are_named():
    old = [rec("a", 0, 1, 2), rec("b", 0, 1, 2)]
    assert "no admission time (t_admitted)" in audit_problem(old)
    with pytest.raises(MissingAuditData, match="t_admitted"):
        max_backlogged_gap(old, INPUT_ONLY)
    no_progress = admitted("a", 0, 1, [(2, 3)])
    no_progress.progress = None
    assert "no output progress" in audit_problem([no_progress])
    assert max_backlogged_gap([admitted("a", 0, 1)], INPUT_ONLY) is None  # one client: no pair
