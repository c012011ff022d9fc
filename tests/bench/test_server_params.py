"""What a live server's replies give the records: its parameters from /server_info, its timings."""

from sglang_fair.bench.http_backend import server_timing
from sglang_fair.bench.server_params import server_params
from sglang_fair.runs.params import PARAM_KEYS


def test_server_params_from_server_info():
    # SGLang groups some arguments; the fair options come from the launch command.
    info = {"schedule_policy": "dlpm", "dp_size": 2, "load_balance_method": "d2lpm",
            "schedule": {"max_running_requests": 48}, "max_total_num_tokens": 20000,
            "launch_command": "python -m sglang.launch_server --schedule-policy dlpm --fair-quantum 4096 "
                              "--fair-router-options '{\"index_capacity_tokens\": 1000}' --fair-router-quantum 500"}
    p = server_params(info, policy_label="label")
    assert (p["policy"], p["quantum"], p["input_weight"], p["output_weight"], p["cost"]) == (
        "dlpm", 4096, 1.0, 2.0, "prefix-aware")
    assert (p["router"], p["router_options"]) == ("d2lpm", {"index_capacity_tokens": 1000, "quantum": 500,
                                                            "input_weight": 1.0, "output_weight": 2.0,
                                                            "idle_timeout_s": 600.0})
    assert (p["num_workers"], p["kv_pool_tokens"], p["max_running_requests"], p["source"]) == (2, 20000, 48,
                                                                                              "server_info")


def test_router_options_come_from_the_plugins_server_info_section():
    # SGLang's launch_command joins argv unquoted: the JSON cannot be read back from it.
    info = {"schedule_policy": "dlpm", "dp_size": 2, "load_balance_method": "d2lpm_global",
            "launch_command": "--dp 2 --fair-router-options {\"local_queue_requests\": 2}",
            "fair_router": {"method": "d2lpm_global", "options": {"local_queue_requests": 2}}}
    assert server_params(info, policy_label=None)["router_options"] == {"local_queue_requests": 2}


def test_server_params_without_server_info_keep_what_the_bench_was_told():
    p = server_params(None, policy_label="lpm")
    assert p["policy"] == "lpm" and p["source"] == "bench"
    assert all(p[k] is None for k in PARAM_KEYS if k not in ("policy", "source"))


def test_server_timing_from_meta_info():
    meta = {"dp_rank": 1, "num_retractions": 2, "forward_entry_time": 1000.25, "queue_time": 0.5,
            "cached_tokens": 3}
    assert server_timing(meta, wall_t0=1000.0) == {"worker": 1, "retractions": 2, "t_admitted": 0.25,
                                                   "queue_time_s": 0.5}
    # A server without --enable-metrics sends neither the admission time nor the queue time.
    assert server_timing({"num_retractions": 0}, wall_t0=1000.0) == {"retractions": 0}
