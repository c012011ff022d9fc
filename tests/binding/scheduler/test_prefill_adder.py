"""The fair adder as SGLang builds it: through ``get_prefill_adder_class`` or by class name (0.5.21)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.binding.scheduler.admission_loops import (assert_dlpm_rounds, dlpm_pass_setup, gated_pass,
                                                     stock_shaped_admission)

pytestmark = pytest.mark.engine


def test_an_adder_sglang_builds_by_class_name_gates_for_the_pass_in_progress(sglang_runtime, fair_config):
    """SGLang 0.5.21's loop calls ``PrefillAdder(...)``; the class standing in for it
    takes the policy of the pass in progress, and outside a pass is the stock adder."""
    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder

    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    admitted, _ = gated_pass(policy, queue, stock_shaped_admission(tree, build_adder, FairPrefillAdder))
    assert_dlpm_rounds(admitted)
    _, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    outside = build_adder(FairPrefillAdder)
    assert outside.fair_policy is None and outside.admission is None
    for req in queue:  # stock admission: the raw queue's order, no policy consulted
        req.init_next_round_input(tree)
        outside.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
    assert [r.rid for r in outside.can_run_list] == [r.rid for r in queue]


def test_an_adder_by_class_name_takes_only_the_pass_of_its_own_tree_cache(sglang_runtime, fair_config):
    """Two schedulers in one process (tests do it): each adder finds its own scheduler's pass."""
    from sglang_fair.binding.scheduler.admission_pass import AdmissionPass
    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder

    policy, _, _, build_adder = dlpm_pass_setup(fair_config)
    other, _, _, build_other = dlpm_pass_setup(fair_config)
    with policy.admitting(AdmissionPass()) as admission:
        mine, theirs = build_adder(FairPrefillAdder), build_other(FairPrefillAdder)
    assert mine.fair_policy is policy and mine.admission is admission
    assert theirs.fair_policy is None and theirs.admission is None  # the other scheduler has no pass open


def test_the_factory_binds_the_policy_and_the_pass_in_progress(sglang_runtime, fair_config):
    from sglang.srt.managers.schedule_policy import PrefillAdder

    from sglang_fair.binding.scheduler.admission_pass import AdmissionPass
    from sglang_fair.binding.scheduler.prefill_adder import FairPrefillAdder, fair_prefill_adder

    policy, _, _, _ = dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy)
    with policy.admitting(AdmissionPass()) as admission:
        bound = fair_prefill_adder(PrefillAdder, scheduler)
    assert bound.func is FairPrefillAdder and bound.keywords == {"fair_policy": policy, "admission": admission}
    # Outside a pass there is none to bind: a gated adder built there refuses to admit (test_admission_gate).
    assert fair_prefill_adder(PrefillAdder, scheduler).keywords == {"fair_policy": policy, "admission": None}


def test_an_adder_class_sglang_changed_is_refused_not_run_unfair(sglang_runtime, fair_config):
    from sglang.srt.managers.schedule_policy import PrefillAdder

    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed
    from sglang_fair.binding.scheduler.prefill_adder import fair_prefill_adder

    policy, _, _, _ = dlpm_pass_setup(fair_config)
    scheduler = SimpleNamespace(policy=policy)

    class ChangedAdder(PrefillAdder):
        pass

    with pytest.raises(AdmissionBypassed, match="ChangedAdder"):
        fair_prefill_adder(ChangedAdder, scheduler)
    # A stock policy keeps whatever SGLang builds.
    assert fair_prefill_adder(ChangedAdder, SimpleNamespace(policy=object())) is ChangedAdder
