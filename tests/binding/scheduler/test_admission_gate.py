"""SGLang's admission loop admits the fair policy's candidates, and only those.

The loops below are shaped like ``Scheduler._get_new_batch_prefill_raw``'s
(``calc_priority``, build the adder, ``for req in self.waiting_queue``) and
run SGLang's real adder and radix cache; others are shaped as a changed SGLang
might be, and must stop the scheduler rather than admit unfairly.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from sglang_fair.testing.engine_pass import enqueue, make_cache, make_policy, make_req

pytestmark = pytest.mark.engine


def _dlpm_pass_setup(fair_config):
    from sglang.srt.managers.schedule_batch import ScheduleBatch

    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder

    fair_config(quantum=8)
    tree, alloc = make_cache([], pool_tokens=4096)
    policy = make_policy("dlpm", tree)
    queue = [make_req(f"{who}{i}", [10 * i + j + (500 if who == "b" else 0) for j in range(1, 9)], who)
             for who in "ab" for i in range(3)]
    enqueue(policy, queue)

    def build_adder(adder_class=None):
        adder_class = adder_class or functools.partial(FairPrefillAdder, fair_policy=policy)
        return adder_class(1, tree, alloc, ScheduleBatch(reqs=[]), 0.5, 1000, None)

    return policy, queue, tree, build_adder


def _stock_shaped_admission(tree, build_adder, adder_class=None, skip=(), slots=None):
    """``_get_new_batch_prefill_raw`` cut to what the walk meets; ``skip``: rids the loop passes over
    for a reason of its own, as SGLang's does for LoRA, pooling mode or prefetch; ``slots``: the
    batch is full (SGLang's break before ``add_one_req``) once that many are admitted."""
    from sglang.srt.managers.schedule_policy import AddReqResult

    def admission(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        adder = build_adder(adder_class)
        for req in scheduler.waiting_queue:
            if slots is not None and len(adder.can_run_list) == slots:
                break
            if req.rid in skip:
                continue
            req.init_next_round_input(tree)
            if adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None) != AddReqResult.CONTINUE:
                break
        admitted = set(adder.can_run_list)
        scheduler.waiting_queue = [r for r in scheduler.waiting_queue if r not in admitted]
        return SimpleNamespace(reqs=list(adder.can_run_list)), running_batch

    return admission


def _gated_pass(policy, queue, admission):
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission

    scheduler = SimpleNamespace(policy=policy, waiting_queue=list(queue))
    batch, _ = gate_prefill_admission(admission, scheduler, None, SimpleNamespace(reqs=[], is_empty=lambda: True))
    return [r.rid for r in batch.reqs], [r.rid for r in scheduler.waiting_queue]


def _assert_dlpm_rounds(admitted: list[str]) -> None:
    # A quantum of one 8-token request; the raw queue is a0 a1 a2 b0 b1 b2.
    # DLPM: each refill round admits one request of each client.
    assert len(admitted) == 6
    for end in (2, 4, 6):
        assert sorted(rid[0] for rid in admitted[end - 2:end]) == ["a", "b"], admitted


def test_the_stock_loop_admits_what_the_policy_offers(sglang_runtime, fair_config):
    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    admitted, waiting = _gated_pass(policy, queue, _stock_shaped_admission(tree, build_adder))
    _assert_dlpm_rounds(admitted)
    assert waiting == [] and policy.walk is None


def test_a_request_the_loop_passes_over_stays_queued_in_its_place(sglang_runtime, fair_config):
    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    admitted, waiting = _gated_pass(policy, queue, _stock_shaped_admission(tree, build_adder, skip={"a0"}))
    assert "a0" not in admitted and waiting == ["a0"]
    # The rest as DLPM walks it: a's quantum goes to a1; b0; a refill at b1; a2 in the second round.
    assert admitted == ["a1", "b0", "b1", "a2", "b2"]


def test_a_pass_left_short_puts_the_queue_back_in_sorted_order(sglang_runtime, fair_config):
    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    admitted, waiting = _gated_pass(policy, queue, _stock_shaped_admission(tree, build_adder, slots=2))
    assert sorted(rid[0] for rid in admitted) == ["a", "b"]
    # The walk moved its third candidate forward; the queue keeps the order calc_priority gave it.
    assert waiting == [r.rid for r in queue if r.rid not in admitted]


def test_a_loop_over_another_order_admits_only_what_the_policy_offers(sglang_runtime, fair_config):
    from collections import Counter

    from sglang.srt.managers.schedule_policy import AddReqResult

    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)

    def reversed_copy(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        adder = build_adder()
        for req in list(reversed(scheduler.waiting_queue)):  # not the order the walk keeps in the queue
            req.init_next_round_input(tree)
            if adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None) != AddReqResult.CONTINUE:
                break
        return SimpleNamespace(reqs=list(adder.can_run_list)), running_batch

    admitted, _ = _gated_pass(policy, queue, reversed_copy)
    counts = Counter(rid[0] for rid in admitted)
    assert admitted and abs(counts["a"] - counts["b"]) <= 1, admitted  # one quantum each per round


def test_a_request_from_outside_the_queue_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed

    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    stranger = make_req("c0", list(range(900, 908)), "c")

    def foreign(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        stranger.init_next_round_input(tree)
        build_adder().add_one_req(stranger, has_chunked_req=False, truncation_align_size=None)
        return None, running_batch

    with pytest.raises(AdmissionBypassed, match="not where the fair policy's walk left"):
        _gated_pass(policy, queue, foreign)
    assert policy.walk is None


def test_admitting_before_the_queue_is_sorted_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed

    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)

    def unsorted(scheduler, delayer, running_batch):
        adder = build_adder()
        req = scheduler.waiting_queue[0]
        req.init_next_round_input(tree)
        adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
        return None, running_batch

    with pytest.raises(AdmissionBypassed, match="before calc_priority started"):
        _gated_pass(policy, queue, unsorted)


def test_admitting_past_the_fair_adder_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang.srt.managers.schedule_policy import PrefillAdder

    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed

    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)

    def stock_adder(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        adder = build_adder(PrefillAdder)  # a later SGLang building its adder another way
        for req in scheduler.waiting_queue:
            req.init_next_round_input(tree)
            adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
        return SimpleNamespace(reqs=list(adder.can_run_list)), running_batch

    with pytest.raises(AdmissionBypassed, match="past the fair prefill adder"):
        _gated_pass(policy, queue, stock_adder)


def test_an_adder_sglang_builds_by_class_name_gates_for_the_pass_in_progress(sglang_runtime, fair_config):
    """SGLang 0.5.21's loop calls ``PrefillAdder(...)``; the class standing in for it
    takes the policy of the pass in progress, and outside a pass is the stock adder."""
    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder

    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    admitted, _ = _gated_pass(policy, queue, _stock_shaped_admission(tree, build_adder, FairPrefillAdder))
    _assert_dlpm_rounds(admitted)
    _, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    outside = build_adder(FairPrefillAdder)
    assert outside.fair_policy is None
    for req in queue:  # stock admission: the raw queue's order, no policy consulted
        req.init_next_round_input(tree)
        outside.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
    assert [r.rid for r in outside.can_run_list] == [r.rid for r in queue]


def test_a_pass_that_returns_before_sorting_the_queue_changes_nothing(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission

    policy, queue, _, _ = _dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy, waiting_queue=list(queue))
    running = SimpleNamespace(reqs=[], is_empty=lambda: True)

    def batch_full(scheduler, delayer, running_batch):
        return None, running_batch

    assert gate_prefill_admission(batch_full, scheduler, None, running) == (None, running)
    assert scheduler.waiting_queue == queue and policy.walk is None


def test_an_adder_class_sglang_changed_is_refused_not_run_unfair(sglang_runtime, fair_config):
    from sglang.srt.managers.schedule_policy import PrefillAdder

    from sglang_fair.binding.scheduler.accounting import fair_prefill_adder
    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed
    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder

    policy, _, _, _ = _dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy)
    bound = fair_prefill_adder(PrefillAdder, scheduler)
    assert bound.func is FairPrefillAdder and bound.keywords == {"fair_policy": policy}

    class ChangedAdder(PrefillAdder):
        pass

    with pytest.raises(AdmissionBypassed, match="ChangedAdder"):
        fair_prefill_adder(ChangedAdder, scheduler)
    # A stock policy keeps whatever SGLang builds.
    assert fair_prefill_adder(ChangedAdder, SimpleNamespace(policy=object())) is ChangedAdder
