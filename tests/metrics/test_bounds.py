"""The bound each configuration is held to (the papers' theorems and the global router's)."""

import pytest

from sglang_fair.metrics.bounds import BoundError, bound_for, router_defaults


def params(**kw):
    base = {"policy": "dlpm", "quantum": 1000.0, "input_weight": 1.0, "output_weight": 2.0, "cost": "prefix-aware",
            "client_weights": {}, "router": "round_robin", "router_options": {}, "num_workers": 1,
            "kv_pool_tokens": 5000, "max_running_requests": 1024, "source": "sim"}
    return base | kw


def test_theorem_bounds():
    b = bound_for(params(), l_input=300)  # DLPM Theorem 4.1: 2 (w_e L + w_q M + Q^u)
    assert b.theorem and "4.1" in b.name and b.value == 2 * (300 + 2 * 5000 + 1000)
    assert b.measure.input_mode == "extend"
    b = bound_for(params(policy="vtc", cost="linear"), l_input=300)  # VTC Theorem 4.4
    assert b.theorem and "4.4" in b.name and b.value == 2 * max(300, 2 * 5000)
    assert b.measure.input_mode == "prompt"  # VTC's linear cost prices the whole prompt
    b = bound_for(params(router="d2lpm", num_workers=4), l_input=300)  # Theorem 5.1: 2 |W| (U + Q^u)
    assert b.theorem and "5.1" in b.name and b.value == 2 * 4 * (300 + 2 * 5000 + 1000)


def test_global_router_bound_reads_its_options_and_defaults():
    defaults = router_defaults("d2lpm_global")
    r = defaults["local_queue_requests"]
    b = bound_for(params(router="d2lpm_global", num_workers=2, router_options={"quantum": 500}), l_input=300)
    q, big_b = 500, defaults["local_queue_tokens"]
    # Theorem G: 2 (Q + w_q D (M + R out) + w_e D (B + L + R L)); unknown outputs fit the KV pool.
    assert b.theorem and b.value == 2 * (q + 2 * 2 * (5000 + r * 5000) + 2 * (big_b + 300 + r * 300))
    b = bound_for(params(router="d2lpm_global", num_workers=2, router_options={"local_queue_tokens": 100}), 300,
                  max_output=10)
    assert b.value == 2 * (defaults["quantum"] + 2 * 2 * (5000 + r * 10) + 2 * (100 + 300 + r * 300))


def test_the_longest_output_tightens_m_when_the_batch_cannot_fill_the_pool():
    b = bound_for(params(max_running_requests=4), l_input=300, max_output=100)  # M = 4 x 100 < 5000
    assert b.value == 2 * (300 + 2 * 400 + 1000) and "4*100" in b.formula
    assert bound_for(params(max_running_requests=4), 300, max_output=2000).value == 2 * (300 + 2 * 5000 + 1000)
    assert bound_for(params(max_running_requests=None), 300, max_output=1).value == 2 * (300 + 2 * 5000 + 1000)


@pytest.mark.parametrize("policy, router, workers", [("lpm", "round_robin", 1), ("fcfs", "round_robin", 2),
                                                     ("vtc", "d2lpm", 2), ("dlpm", "preble", 2)])
def test_configurations_without_a_theorem_get_the_d2lpm_shaped_reference(policy, router, workers):
    b = bound_for(params(policy=policy, router=router, num_workers=workers, cost="linear"), l_input=300)
    assert not b.theorem and b.name.startswith("reference") and policy in b.name
    assert b.value == 2 * workers * (300 + 2 * 5000 + 1000)
    assert b.measure.input_mode == "extend"


def test_missing_parameters_and_weighted_clients_are_named():
    with pytest.raises(BoundError, match="kv_pool_tokens"):
        bound_for(params(kv_pool_tokens=None), 300)
    with pytest.raises(BoundError, match="unequal weights"):
        bound_for(params(client_weights={"a": 2.0}), 300)
