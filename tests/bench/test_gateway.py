"""The gateway harness's pure parts (sglang_fair/bench/gateway.py); the gateways themselves run in
tests/benchmarks/test_scripts.py."""

import pytest

from sglang_fair.bench.gateway import core_slices, smg_priority_config


def test_each_worker_gets_an_equal_slice_of_the_cores():
    assert core_slices(2, [3, 0, 1, 2]) == [[0, 1], [2, 3]]
    assert core_slices(2, [0, 1, 2]) == [[0], [1]]  # the odd core is left to the gateway
    assert core_slices(0, [0, 1]) == []  # a gateway in front of workers started elsewhere


def test_more_workers_than_cores_is_refused():
    with pytest.raises(ValueError, match="3 gateway workers need 3 cores, 2 available"):
        core_slices(3, [0, 1])


def test_the_priority_config_holds_the_bulk_tenants_to_the_bulk_class():
    import yaml

    config = yaml.safe_load(smg_priority_config(["flood"], interactive_slots=2))
    assert config["tenant_policies"] == {"header:flood": {"max_class": "bulk"}}
    assert config["classes"]["interactive"]["reserved_floor"] == 2
    assert all(not c["can_preempt"] and c["reserved_per_slot"] == 0.0 for c in config["classes"].values())
