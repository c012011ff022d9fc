"""SGLang's admission loop admits the fair policy's candidates, and only those.

The loops below are shaped like ``Scheduler._get_new_batch_prefill_raw``'s
(``calc_priority``, build the adder, ``for req in self.waiting_queue``) and
run SGLang's real adder and radix cache; others are shaped as a changed SGLang
might be, and must stop the scheduler rather than admit unfairly.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglang_fair.testing.engine_pass import make_req
from tests.binding.scheduler.admission_loops import (assert_dlpm_rounds, dlpm_pass_setup, gated_pass,
                                                     stock_shaped_admission)

pytestmark = pytest.mark.engine


def test_the_stock_loop_admits_what_the_policy_offers(sglang_runtime, fair_config):
    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    admitted, waiting = gated_pass(policy, queue, stock_shaped_admission(tree, build_adder))
    assert_dlpm_rounds(admitted)
    assert waiting == [] and policy.admission is None


def test_a_request_the_loop_passes_over_stays_queued_in_its_place(sglang_runtime, fair_config):
    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    admitted, waiting = gated_pass(policy, queue, stock_shaped_admission(tree, build_adder, skip={"a0"}))
    assert "a0" not in admitted and waiting == ["a0"]
    # The rest as DLPM walks it: a's quantum goes to a1; b0; a refill at b1; a2 in the second round.
    assert admitted == ["a1", "b0", "b1", "a2", "b2"]


def test_a_pass_left_short_puts_the_queue_back_in_sorted_order(sglang_runtime, fair_config):
    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    admitted, waiting = gated_pass(policy, queue, stock_shaped_admission(tree, build_adder, slots=2))
    assert sorted(rid[0] for rid in admitted) == ["a", "b"]
    # The walk moved its third candidate forward; the queue keeps the order calc_priority gave it.
    assert waiting == [r.rid for r in queue if r.rid not in admitted]


def test_a_loop_over_another_order_admits_only_what_the_policy_offers(sglang_runtime, fair_config):
    from collections import Counter

    from sglang.srt.managers.schedule_policy import AddReqResult

    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)

    def reversed_copy(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        adder = build_adder()
        for req in list(reversed(scheduler.waiting_queue)):  # not the order the walk keeps in the queue
            req.init_next_round_input(tree)
            if adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None) != AddReqResult.CONTINUE:
                break
        return SimpleNamespace(reqs=list(adder.can_run_list)), running_batch

    admitted, _ = gated_pass(policy, queue, reversed_copy)
    counts = Counter(rid[0] for rid in admitted)
    assert admitted and abs(counts["a"] - counts["b"]) <= 1, admitted  # one quantum each per round


def test_a_request_from_outside_the_queue_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed

    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    stranger = make_req("c0", list(range(900, 908)), "c")

    def foreign(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        stranger.init_next_round_input(tree)
        build_adder().add_one_req(stranger, has_chunked_req=False, truncation_align_size=None)
        return None, running_batch

    with pytest.raises(AdmissionBypassed, match="not where the fair policy's walk left"):
        gated_pass(policy, queue, foreign)
    assert policy.admission is None


def test_admitting_before_the_queue_is_sorted_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed

    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)

    def unsorted(scheduler, delayer, running_batch):
        adder = build_adder()
        req = scheduler.waiting_queue[0]
        req.init_next_round_input(tree)
        adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
        return None, running_batch

    with pytest.raises(AdmissionBypassed, match="before calc_priority started"):
        gated_pass(policy, queue, unsorted)


def test_admitting_past_the_fair_adder_stops_the_scheduler(sglang_runtime, fair_config):
    from sglang.srt.managers.schedule_policy import PrefillAdder

    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed
    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder

    if PrefillAdder is FairPrefillAdder:  # SGLang 0.5.21: the class its loop builds by name is ours
        pytest.skip("this SGLang's PrefillAdder is the fair adder: no stock adder to bypass it with")
    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)

    def stock_adder(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        adder = build_adder(PrefillAdder)  # a later SGLang building its adder another way
        for req in scheduler.waiting_queue:
            req.init_next_round_input(tree)
            adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
        return SimpleNamespace(reqs=list(adder.can_run_list)), running_batch

    with pytest.raises(AdmissionBypassed, match="past the fair prefill adder"):
        gated_pass(policy, queue, stock_adder)


def test_a_pass_that_returns_before_sorting_the_queue_changes_nothing(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission

    policy, queue, _, _ = dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy, waiting_queue=list(queue))
    running = SimpleNamespace(reqs=[], is_empty=lambda: True)

    def batch_full(scheduler, delayer, running_batch):
        return None, running_batch

    assert gate_prefill_admission(batch_full, scheduler, None, running) == (None, running)
    assert scheduler.waiting_queue == queue and policy.admission is None


def test_after_a_chunk_of_prefill_the_gate_lets_a_light_clients_running_request_decode(sglang_runtime, fair_config):
    """With isolation on, once a chunk's worth of tokens (``--chunked-prefill-size``) is prefilled since the
    running batch last decoded, the next pass is skipped (SGLang then decodes the running batch) while a
    light client runs beside the flood's waiting prompts, also between chunks of one prompt; a pass that
    returns no batch, or a mixed prefill, decoded the batch and starts the count again."""
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission
    from sglang_fair.testing.engine_pass import enqueue, make_cache, make_policy

    fair_config(quantum=8, isolation=True)
    tree, _ = make_cache([], pool_tokens=4096)
    policy = make_policy("dlpm", tree)
    flood = [make_req(f"f{i}", [10 * i + j for j in range(1, 9)], "flood") for i in range(5)]
    light = make_req("l0", [900 + j for j in range(8)], "light")
    enqueue(policy, [*flood, light])
    for req in [*flood[:3], light]:
        policy.on_admitted(req)
    running = SimpleNamespace(reqs=[*flood[:3], light], is_empty=lambda: False)
    scheduler = SimpleNamespace(policy=policy, waiting_queue=flood[3:], chunked_req=None, chunked_prefill_size=100,
                                max_prefill_tokens=1000)
    passes = []

    def prefill(tokens, decoding_reqs=None):
        def admission(scheduler, delayer, running_batch):
            passes.append(tokens)
            if tokens is None:  # nothing admitted: SGLang decodes the running batch
                return None, running_batch
            return SimpleNamespace(reqs=[], extend_num_tokens=tokens, decoding_reqs=decoding_reqs), running_batch
        return admission

    def step(admission) -> bool:
        """One pass through the gate; whether SGLang's pass ran."""
        before = len(passes)
        batch, batch_after = gate_prefill_admission(admission, scheduler, None, running)
        assert batch_after is running
        return len(passes) > before

    assert step(prefill(60)) and step(prefill(30))  # 90 tokens: less than a chunk
    assert step(prefill(10))  # a chunk's worth now ...
    assert not step(prefill(50))  # ... so the running batch decodes next
    assert step(prefill(99)) and step(prefill(None))  # a pass with no batch: SGLang decoded
    assert step(prefill(99)) and step(prefill(100, decoding_reqs=running.reqs))  # a mixed prefill decoded too
    scheduler.chunked_req = flood[3]  # between two chunks of a long prompt, as SGLang's prefill_decode_interval
    assert step(prefill(100)) and not step(prefill(100)) and step(prefill(100))
    scheduler.chunked_req = None
    assert policy.decode_turns_taken == 2
    policy.fair.finish(policy.fair.requests["l0"])
    assert step(prefill(100)) and step(prefill(100))  # no light client running: prefills follow each other
    assert policy.decode_turns_taken == 2
