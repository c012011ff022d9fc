"""The binding with SGLang's real classes: RadixCache, SchedulePolicy, PrefillAdder, Req.

The admission loop here is the shape of ``Scheduler._get_new_batch_prefill_raw``
(walk the queue, ``init_next_round_input``, ``add_one_req``, stop on a
non-CONTINUE result); everything it calls is SGLang's own code.
"""

from __future__ import annotations

import pytest

from sglang_fair.testing.engine_pass import admission_pass, enqueue, make_cache, make_policy, make_req

pytestmark = pytest.mark.engine

PREFIX = list(range(1, 41))  # 40 tokens that the heavy client's requests share


def _setup(policy: str):
    # The heavy client's prefix is already cached (e.g. by its earlier requests).
    tree, alloc = make_cache([PREFIX], pool_tokens=4096)
    return make_policy(policy, tree), tree, alloc


def _admission_pass(policy, tree, alloc, queue, rem_input_tokens: int) -> list[str]:
    enqueue(policy, queue)
    return [r.rid for r in admission_pass(policy, tree, alloc, queue, rem_input_tokens)]


def _flood_queue():
    heavy = [make_req(f"h{i}", PREFIX + [100 + 10 * i + j for j in range(8)], "heavy") for i in range(6)]
    light = [make_req(f"l{i}", [500 + 40 * i + j for j in range(30)], "light") for i in range(2)]
    return heavy + light


def test_lpm_admits_only_the_cached_flood(sglang_runtime, fair_config):
    fair_config()
    policy, tree, alloc = _setup("lpm")
    admitted = _admission_pass(policy, tree, alloc, _flood_queue(), rem_input_tokens=60)
    assert admitted and all(rid.startswith("h") for rid in admitted)


def test_dlpm_admits_the_light_client_within_the_same_budget(sglang_runtime, fair_config):
    fair_config(quantum=20)
    policy, tree, alloc = _setup("dlpm")
    admitted = _admission_pass(policy, tree, alloc, _flood_queue(), rem_input_tokens=60)
    assert any(rid.startswith("l") for rid in admitted)
    assert any(rid.startswith("h") for rid in admitted)
    fair = policy.fair
    # Cached prefix tokens are free: each heavy request paid for its 8 new tokens only.
    heavy = fair.ledger.get("heavy")
    assert heavy.cached_tokens == 40 * heavy.admitted
    assert heavy.service == pytest.approx(8 * heavy.admitted)
    assert fair.ledger.get("light").service == pytest.approx(30 * fair.ledger.get("light").admitted)


def test_vtc_alternates_clients_by_counter(sglang_runtime, fair_config):
    fair_config()
    policy, tree, alloc = _setup("vtc")
    admitted = _admission_pass(policy, tree, alloc, _flood_queue(), rem_input_tokens=200)
    # Counters (linear cost: cached tokens count under VTC): tie at 0 -> earliest
    # request h0 (heavy 48); light 0 -> l0 (30); light 30 -> l1 (60); heavy 48 -> h1.
    assert admitted[:4] == ["h0", "l0", "l1", "h1"]
    assert len(admitted) == 8  # everything fits in this budget: VTC is work-conserving


@pytest.mark.parametrize("policy_name, first", [("justitia", "mouse"), ("fcfs", "e0")])
def test_justitia_admits_by_virtual_finish_time_where_fcfs_admits_by_arrival(sglang_runtime, fair_config,
                                                                             policy_name, first):
    # An application of three long calls arrives first, a short one after it: Justitia serves the
    # job that would finish first under fair sharing (SGLang has no such sort: the binding applies ours).
    fair_config()
    policy, tree, alloc = _setup(policy_name)
    elephant = [make_req(f"e{i}", [2000 + 300 * i + j for j in range(200)], "elephant;app=mapreduce;ia=big")
                for i in range(3)]
    mouse = make_req("mouse", [9000 + j for j in range(20)], "mice;app=mouse;ia=small")
    admitted = _admission_pass(policy, tree, alloc, [*elephant, mouse], rem_input_tokens=220)
    assert admitted[0] == first


def test_retracted_request_is_not_charged_twice(sglang_runtime, fair_config):
    fair_config(quantum=1000)
    policy, tree, alloc = _setup("dlpm")
    req = make_req("r", [900 + j for j in range(20)], "alice")
    assert _admission_pass(policy, tree, alloc, [req], rem_input_tokens=100) == ["r"]
    req.output_ids.extend([5, 6])
    policy.on_progress(req)  # two tokens decoded
    served = policy.fair.ledger.get("alice").service
    assert served == pytest.approx(20 + 2 * 2)
    # Retraction re-queues it, keeping its output; SGLang re-prefills it later.
    policy.on_queued(req)
    assert policy.fair.activity["alice"].queued == 1
    assert _admission_pass(policy, tree, alloc, [req], rem_input_tokens=100) == ["r"]
    policy.on_progress(req)
    assert policy.fair.ledger.get("alice").service == pytest.approx(served)


def test_request_aborted_in_queue_leaves_the_fair_state(sglang_runtime, fair_config):
    fair_config()
    policy, _, _ = _setup("dlpm")
    a, b = make_req("a", [1, 2, 3], "alice"), make_req("b", [4, 5, 6], "bob")
    policy.on_queued(a)
    policy.on_queued(b)
    policy.reconcile_queue([b])  # SGLang popped ``a`` (abort_request)
    assert "a" not in policy.fair.requests
    assert policy.fair.activity["alice"].queued == 0
    assert policy.fair.activity["bob"].queued == 1


def test_client_identity_is_normalized(sglang_runtime, fair_config):
    fair_config()
    policy, _, _ = _setup("vtc")
    odd = make_req("x", [1, 2], "evil client\n" * 20)
    none = make_req("y", [1, 2], None)
    assert policy.track(odd).client.startswith("~")
    assert policy.track(none).client == "default"


def test_chunked_prefill_is_charged_once_for_its_whole_extend(sglang_runtime, fair_config):
    fair_config()
    policy, tree, alloc = _setup("dlpm")
    long_req = make_req("long", [700 + j for j in range(100)], "alice")
    enqueue(policy, [long_req])
    admitted = admission_pass(policy, tree, alloc, [long_req], rem_input_tokens=1000, rem_chunk_tokens=32)
    assert admitted == [long_req]
    # SGLang admitted only the first chunk (this round extends to Req.extend_end; 0.5.21: Req.extend_range.end)...
    assert (long_req.extend_end if hasattr(long_req, "extend_end") else long_req.extend_range.end) == 32
    assert policy.fair.ledger.get("alice").service == pytest.approx(100)  # ...we charged the whole extend
