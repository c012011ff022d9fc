"""The admission gate refuses to run unfair when SGLang's admission loop changes shape.

The shape check reads the real ``Scheduler._get_new_batch_prefill_raw`` and
functions below written the way a changed SGLang might; the run-time checks
use SGLang's real adder, radix cache and LoRA drainer.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from sglang_fair.testing.engine_pass import enqueue, make_cache, make_policy, make_req

pytestmark = pytest.mark.engine


def test_the_pinned_release_has_the_shape_the_gate_needs(sglang_runtime):
    from sglang.srt.managers.scheduler import Scheduler

    from sglang_fair.binding.scheduler.admission_loop_check import admission_loop_problems

    assert admission_loop_problems(Scheduler._get_new_batch_prefill_raw) == []


# Admission functions as a later SGLang might write them (never called, only parsed).
def _loop_renamed(self):
    adder = self.get_prefill_adder_class()(1)
    for req in self.pending_requests:
        adder.add_one_req(req)


def _queue_iterated_first(self):
    adder = self.get_prefill_adder_class()(1)
    ready = [req for req in self.waiting_queue if req.ready]
    for req in self.waiting_queue:
        adder.add_one_req(req)
    return ready


def _early_return(self):
    adder = self.get_prefill_adder_class()(1)
    if adder.full:
        return None
    for req in self.waiting_queue:
        adder.add_one_req(req)


def _queue_passed_elsewhere(self):
    adder = self.get_prefill_adder_class()(1)
    self.prefetcher.warm(self.waiting_queue)
    for req in self.waiting_queue:
        adder.add_one_req(req)


def _adder_built_twice(self):
    adder = self.get_prefill_adder_class()(1)
    adder = self.get_prefill_adder_class()(2)
    for req in self.waiting_queue:
        adder.add_one_req(req)


def _admits_elsewhere(self):
    adder = self.get_prefill_adder_class()(1)
    for req in self.waiting_queue:
        adder.stage(req)


def _known_readers_only(self):
    adder = self.get_prefill_adder_class()(1)
    limit = self.policy.shortest_prefill_chunk_limit(self.chunked_req, self.waiting_queue, 0, 1)
    loras = {req.lora_id for req in self.running_batch.reqs}
    self.lora_drainer.update_draining_state(self.waiting_queue, loras)
    adder.begin(len(self.waiting_queue), limit)
    for req in self.waiting_queue:
        adder.add_one_req(req)


@pytest.mark.parametrize("function, problem", [
    (_loop_renamed, "no `for req in self.waiting_queue` loop"),
    (_queue_iterated_first, "may leave or iterate before the admission loop"),
    (_early_return, "may leave or iterate before the admission loop"),
    (_queue_passed_elsewhere, "uses self.waiting_queue before the admission loop"),
    (_adder_built_twice, "found 2"),
    (_admits_elsewhere, "no longer calls adder.add_one_req"),
])
def test_a_changed_admission_loop_is_named(function, problem):
    from sglang_fair.binding.scheduler.admission_loop_check import admission_loop_problems

    problems = admission_loop_problems(function, release="0.5.23")
    assert any(problem in p for p in problems), problems


def test_known_queue_readers_between_adder_and_loop_pass():
    from sglang_fair.binding.scheduler.admission_loop_check import admission_loop_problems

    assert admission_loop_problems(_known_readers_only, release="0.5.23") == []


def _adder_class_named(self):  # SGLang 0.5.21's form
    adder = PrefillAdder(1)  # noqa: F821 - parsed, never run
    for req in self.waiting_queue:
        adder.add_one_req(req)


def test_the_adder_is_built_the_way_the_release_lets_the_hook_table_arm_it():
    from sglang_fair.binding.scheduler.admission_loop_check import admission_loop_problems

    # 0.5.21 has no get_prefill_adder_class; the table replaces the class name PrefillAdder instead.
    assert admission_loop_problems(_adder_class_named, release="0.5.21") == []
    assert admission_loop_problems(_known_readers_only, release="0.5.21") == [
        "expected one `adder = PrefillAdder(...)` statement, found 0"]
    # From 0.5.22 a class named in the loop would bypass the hooked get_prefill_adder_class.
    assert admission_loop_problems(_adder_class_named, release="0.5.22") == [
        "expected one `adder = self.get_prefill_adder_class()(...)` statement, found 0"]


def _dlpm_pass_setup(fair_config):
    from sglang.srt.managers.schedule_batch import ScheduleBatch

    from sglang_fair.binding.scheduler.admission_gate import _AdmissionQueue
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

    return policy, _AdmissionQueue(queue), tree, build_adder


def test_admitting_a_request_the_policy_did_not_offer_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_loop_check import AdmissionBypassed

    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    policy.admission_queue = queue
    adder = build_adder()
    bypass = list.__iter__(queue)  # a loop that no longer goes through the armed queue
    req = next(bypass)
    req.init_next_round_input(tree)
    with pytest.raises(AdmissionBypassed, match="did not offer"):
        adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)


def test_an_armed_queue_left_unwalked_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission
    from sglang_fair.binding.scheduler.admission_loop_check import AdmissionBypassed

    policy, queue, _, build_adder = _dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy, waiting_queue=list(queue), enable_priority_preemption=False)

    def admission_that_skips_the_loop(scheduler, delayer, running_batch):
        build_adder()
        return None, running_batch

    with pytest.raises(AdmissionBypassed, match="never iterated the waiting queue"):
        gate_prefill_admission(admission_that_skips_the_loop, scheduler, None, SimpleNamespace(reqs=[]))
    assert policy.admission_queue is None and scheduler.waiting_queue.armed_by is None


def _admit_in_a_gated_pass(fair_config, adder_class=None) -> list[str]:
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission

    policy, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy, waiting_queue=list(queue), enable_priority_preemption=False)

    def stock_shaped_admission(scheduler, delayer, running_batch):
        adder = build_adder(adder_class)
        for req in scheduler.waiting_queue:
            req.init_next_round_input(tree)
            adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
        return [r.rid for r in adder.can_run_list], running_batch

    admitted, _ = gate_prefill_admission(stock_shaped_admission, scheduler, None, SimpleNamespace(reqs=[]))
    return admitted


def _assert_dlpm_rounds(admitted: list[str]) -> None:
    # A quantum of one 8-token request; the raw queue is a0 a1 a2 b0 b1 b2.
    # DLPM: each refill round admits one request of each client.
    assert len(admitted) == 6
    for end in (2, 4, 6):
        assert sorted(rid[0] for rid in admitted[end - 2:end]) == ["a", "b"], admitted


def test_the_gated_loop_admits_what_the_policy_offers(sglang_runtime, fair_config):
    _assert_dlpm_rounds(_admit_in_a_gated_pass(fair_config))


def test_an_adder_sglang_builds_by_class_name_gates_for_the_pass_in_progress(sglang_runtime, fair_config):
    """SGLang 0.5.21's loop calls ``PrefillAdder(...)``; the class standing in for it
    takes the policy of the pass in progress, and outside a pass is the stock adder."""
    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder

    _assert_dlpm_rounds(_admit_in_a_gated_pass(fair_config, FairPrefillAdder))
    _, queue, tree, build_adder = _dlpm_pass_setup(fair_config)
    outside = build_adder(FairPrefillAdder)
    assert outside.fair_policy is None
    for req in queue:  # stock admission: the raw queue's order, no policy consulted
        req.init_next_round_input(tree)
        outside.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
    assert [r.rid for r in outside.can_run_list] == [r.rid for r in queue]


def test_the_lora_drainer_does_not_consume_the_armed_walk(sglang_runtime, fair_config):
    from sglang.srt.lora.lora_drainer import LoRADrainer

    policy, queue, _, _ = _dlpm_pass_setup(fair_config)
    queue.armed_by = policy
    drainer = LoRADrainer(max_loras_per_batch=2, max_wait_time_secs=1.0)
    drainer.update_draining_state(queue, [])
    assert drainer.adapter_to_stats[None].num_waiting_reqs == len(queue)
    assert queue.armed_by is policy  # still armed for the admission loop


def test_a_pass_that_returns_before_building_the_adder_is_not_a_bypass(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission

    policy, queue, _, _ = _dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy, waiting_queue=list(queue), enable_priority_preemption=False)
    running = SimpleNamespace(reqs=[])

    def batch_full(scheduler, delayer, running_batch):
        return None, running_batch

    assert gate_prefill_admission(batch_full, scheduler, None, running) == (None, running)
    assert list(scheduler.waiting_queue) == queue  # plain iteration: nothing was armed


def test_an_adder_class_sglang_changed_is_refused_not_run_unfair(sglang_runtime, fair_config):
    from sglang.srt.managers.schedule_policy import PrefillAdder

    from sglang_fair.binding.scheduler.accounting import fair_prefill_adder
    from sglang_fair.binding.scheduler.admission_loop_check import AdmissionBypassed
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
