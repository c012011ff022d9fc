"""One ``AdmissionPass`` per admission pass: created by the gate, handed to the adder, closed after.

The gate creates the pass before SGLang's ``_get_new_batch_prefill_raw`` runs,
holds it open on the policy while it runs (``calc_priority`` starts the walk
in it; the adder is built with it), and closes it when the call returns or
raises, so that no pass state outlives its pass.
"""

from __future__ import annotations

import pytest

from tests.binding.scheduler.admission_loops import dlpm_pass_setup, gated_pass, stock_shaped_admission

pytestmark = pytest.mark.engine


def _recording(build_adder, adders: list):
    def build(adder_class=None):
        adder = build_adder(adder_class)
        adders.append(adder)
        return adder

    return build


def test_the_gate_creates_the_pass_hands_it_to_the_adder_and_closes_it(sglang_runtime, fair_config):
    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    adders, seen = [], {}
    loop = stock_shaped_admission(tree, _recording(build_adder, adders))

    def admission(scheduler, delayer, running_batch):
        admission_pass = seen["pass"] = policy.admission
        # Created at the start of the pass, before SGLang sorts the queue: no walk yet.
        assert admission_pass is not None and not admission_pass.closed and admission_pass.walk is None
        result = loop(scheduler, delayer, running_batch)
        seen["walk"] = admission_pass.walk  # calc_priority started it in the pass
        return result

    admitted, _ = gated_pass(policy, queue, admission)
    assert len(admitted) == len(queue)
    admission_pass = seen["pass"]
    assert seen["walk"] is not None
    assert [adder.admission for adder in adders] == [admission_pass]  # handed to the adder SGLang built
    assert policy.admission is None and admission_pass.closed and admission_pass.walk is None


def test_a_pass_that_raises_is_closed_and_its_adder_admits_no_more(sglang_runtime, fair_config):
    from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed

    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    adders = []

    def failing(scheduler, delayer, running_batch):
        scheduler.policy.calc_priority(scheduler.waiting_queue, running_batch)
        adders.append(build_adder())
        raise RuntimeError("SGLang failed mid-pass")

    with pytest.raises(RuntimeError, match="mid-pass"):
        gated_pass(policy, queue, failing)
    (adder,) = adders
    assert policy.admission is None and adder.admission.closed and adder.admission.walk is None
    req = queue[0]
    req.init_next_round_input(tree)
    with pytest.raises(AdmissionBypassed, match="before calc_priority started"):
        adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)


def test_an_isolation_pass_carries_its_starved_clients_to_make_room_and_the_walk(sglang_runtime, fair_config,
                                                                                  monkeypatch):
    from sglang_fair.binding.scheduler import isolation

    policy, queue, tree, build_adder = dlpm_pass_setup(fair_config)
    made_room = []
    monkeypatch.setattr(isolation, "starved_clients", lambda fair, running_batch: {"b"})
    monkeypatch.setattr(isolation, "batch_full", lambda scheduler, running_batch: True)
    monkeypatch.setattr(isolation, "make_room", lambda scheduler, fair, running_batch, starved: made_room.append(
        (fair.admission, set(starved))))
    loop = stock_shaped_admission(tree, build_adder)
    seen = {}

    def admission(scheduler, delayer, running_batch):
        seen["pass"] = policy.admission
        return loop(scheduler, delayer, running_batch)

    admitted, _ = gated_pass(policy, queue, admission)
    admission_pass = seen["pass"]
    assert admission_pass.starved == {"b"} and admission_pass.preempting
    assert made_room == [(admission_pass, {"b"})]  # room made inside the pass, for its starved clients
    assert admitted[0] == "b0"  # the walk offered the starved client's request first
