"""Policy parameters in summary.json, as the simulator records them."""

from sglang_fair.core import FairOptions
from sglang_fair.runs.params import PARAM_KEYS, sim_params


def test_sim_params_resolve_the_policy_default_cost():
    p = sim_params(FairOptions(policy="vtc", quantum=512), "d2lpm", {"quantum": 7}, 2, 9000, 64)
    assert set(p) == set(PARAM_KEYS)
    assert (p["policy"], p["quantum"], p["cost"], p["router_options"], p["kv_pool_tokens"]) == (
        "vtc", 512, "linear", {"quantum": 7}, 9000)
    assert sim_params(FairOptions(policy="dlpm"), "round_robin", {}, 1, 9000, 64)["cost"] == "prefix-aware"
