"""Admission loops shaped like SGLang's, for the gate, pass and adder tests.

The loops are shaped like ``Scheduler._get_new_batch_prefill_raw``'s
(``calc_priority``, build the adder, ``for req in self.waiting_queue``) and
run SGLang's real adder and radix cache.
"""

from __future__ import annotations

from types import SimpleNamespace

from sglang_fair.testing.engine_pass import enqueue, make_cache, make_policy, make_req


def dlpm_pass_setup(fair_config):
    """A DLPM policy over a queue of two clients' requests, and ``build_adder``: the adder SGLang
    builds in a pass, by default through ``get_prefill_adder_class`` (bound to the pass in progress)."""
    from sglang.srt.managers.schedule_batch import ScheduleBatch
    from sglang.srt.managers.schedule_policy import PrefillAdder

    from sglang_fair.binding.scheduler.prefill_adder import fair_prefill_adder

    fair_config(quantum=8)
    tree, alloc = make_cache([], pool_tokens=4096)
    policy = make_policy("dlpm", tree)
    queue = [make_req(f"{who}{i}", [10 * i + j + (500 if who == "b" else 0) for j in range(1, 9)], who)
             for who in "ab" for i in range(3)]
    enqueue(policy, queue)

    def build_adder(adder_class=None):
        adder_class = adder_class or fair_prefill_adder(PrefillAdder, SimpleNamespace(policy=policy))
        return adder_class(1, tree, alloc, ScheduleBatch(reqs=[]), 0.5, 1000, None)

    return policy, queue, tree, build_adder


def stock_shaped_admission(tree, build_adder, adder_class=None, skip=(), slots=None):
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


def gated_pass(policy, queue, admission):
    from sglang_fair.binding.scheduler.admission_gate import gate_prefill_admission

    scheduler = SimpleNamespace(policy=policy, waiting_queue=list(queue))
    batch, _ = gate_prefill_admission(admission, scheduler, None, SimpleNamespace(reqs=[], is_empty=lambda: True))
    return [r.rid for r in batch.reqs], [r.rid for r in scheduler.waiting_queue]


def assert_dlpm_rounds(admitted: list[str]) -> None:
    # A quantum of one 8-token request; the raw queue is a0 a1 a2 b0 b1 b2.
    # DLPM: each refill round admits one request of each client.
    assert len(admitted) == 6
    for end in (2, 4, 6):
        assert sorted(rid[0] for rid in admitted[end - 2:end]) == ["a", "b"], admitted
