"""bench/sim_trends.py: the pure helpers of the simulator grid (no grid is run)."""

import importlib.util
from pathlib import Path

import pytest

from sglang_fair.runs.records import RequestRecord
from sglang_fair.workloads.model import Call, Program, Workload

_PATH = Path(__file__).resolve().parents[2] / "bench" / "sim_trends.py"
_spec = importlib.util.spec_from_file_location("sim_trends", _PATH)
st = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(st)


def test_kv_pool_follows_sglang_memory_heuristic():
    # 512 + 1.5 x 8192 + 128 + 2 x 256 + 8 x 58 MiB reserved on an 81,559 MiB H100
    assert st.sglang_reserved_mib() == 13_904
    assert st.mem_fraction_static() == 0.83
    pool = st.h100_kv_pool_tokens()
    assert pool == int((0.83 * 81_559 * 2**20 - 8_030_261_248 * 2) // 131_072)
    assert 400_000 < pool < 440_000  # the profile's estimate is 420k
    assert st.LLAMA_8B_KV_BYTES_PER_TOKEN == 131_072


def test_reserve_has_sglang_floor_of_10_gib():
    old = st.SGLANG_CHUNKED_PREFILL
    try:
        st.SGLANG_CHUNKED_PREFILL = 0
        assert st.sglang_reserved_mib() == 10 * 1024
    finally:
        st.SGLANG_CHUNKED_PREFILL = old


def test_prompt_lengths_extend_the_first_parent():
    calls = (Call(tokens=(1,) * 10, max_new_tokens=5),
             Call(tokens=(2,) * 3, max_new_tokens=4, parents=(0,), extends_parent=True),
             Call(tokens=(3,) * 2, max_new_tokens=1, parents=(1,), extends_parent=True),
             Call(tokens=(4,) * 7, max_new_tokens=2, parents=(0,)))  # depends, does not extend
    assert st.prompt_lengths(calls) == [10, 18, 24, 7]
    wl = Workload("w", [Program("p", "c", 0.0, calls), Program("q", "c", 4.0, calls[:1])])
    assert st.offered_service(wl) == (10 + 18 + 24 + 7) + 2 * (5 + 4 + 1 + 2) + (10 + 2 * 5)
    assert st.arrival_span(wl) == 4.0


def test_rate_grows_with_workers_and_keeps_client_ratios():
    one = st.paper_workload("qa", "s1", 1, seed=0, duration=20)
    four = st.paper_workload("qa", "s1", 4, seed=0, duration=20)
    count = lambda wl, c: sum(p.client == c for p in wl.programs)  # noqa: E731
    rates = st.client_rates("qa", "s1")
    for c, rate in rates.items():
        assert count(one, c) == max(1, round(rate * 20))
        assert count(four, c) == max(1, round(4 * rate * 20))
    assert rates["bad"] == pytest.approx(4 * rates["good-0"])  # Table 3 S1: the misbehaving client's 4x rate
    doc = max(len(c.tokens) for p in one.programs for c in p.calls)
    assert doc > 20_000  # paper-scale documents


def test_one_worker_runs_each_local_policy_once_without_preble():
    names = [n for n, _ in st.systems_at(1)]
    assert names == ["fcfs", "lpm", "vtc", "dlpm"]
    assert all(router == "round_robin" for _, (_, router, _) in st.systems_at(1))
    multi = dict(st.systems_at(4))
    assert multi["d2lpm"][1] == "d2lpm_global" and multi["d2lpm-paper"][1] == "d2lpm"
    assert "fcfs" not in multi


def _row(system, thr, jain=0.95, p99=10.0, d=4, w="tot", sc="s2", within=True):
    return {"workload": w, "scenario": sc, "D": d, "kv_pool_tokens": 1, "system": system, "throughput": thr,
            "jain": jain, "wb_p99": p99, "gap": 1.0, "bound": 10.0, "within": within}


def test_targets_pass_and_miss():
    rows = [_row("preble", 100.0, p99=9.0), _row("vtc", 60.0), _row("d2lpm-paper", 80.0), _row("d2lpm", 96.0)]
    (c,) = st.target_checks(rows, pool=1)
    assert c["pass"] == {"throughput": True, "jain": True, "p99": False, "bound": True, "vs_vtc": True}
    assert c["vs_vtc"] == pytest.approx(1.6)
    text = st.targets_markdown([c])
    assert "MISS" in text and "4 of 5 checks pass over 1 cells; misses: WB P99 vs Preble 1." in text


def test_qa_s2_d8_throughput_target_is_relaxed():
    rows = [_row("preble", 100.0, w="qa", d=8), _row("vtc", 50.0, w="qa", d=8),
            _row("d2lpm", 81.0, w="qa", d=8, jain=0.5)]
    (c,) = st.target_checks(rows, pool=1)
    assert c["min_vs_preble"] == 0.8 and c["pass"]["throughput"] and not c["pass"]["jain"]
    assert "vs_vtc" not in c["pass"]


def _rec(client, sent, admitted):
    return RequestRecord(rid=f"{client}{sent}", client=client, program_id=f"{client}{sent}", call_index=0,
                         well_behaved=True, t_sent=sent, t_first_token=admitted + 1, t_done=admitted + 2,
                         prompt_tokens=10, cached_tokens=0, output_tokens=1, t_admitted=admitted)


def test_waiting_share_is_the_mean_backlogged_fraction():
    records = [_rec("a", 0.0, 5.0), _rec("b", 2.0, 4.0), _rec("b", 6.0, 8.0)]
    assert st.waiting_share(records, (0.0, 10.0), ["a", "b"]) == pytest.approx((0.5 + 0.4) / 2)
    assert st.waiting_share(records, None, ["a"]) is None


def test_seed_spread_counts_seeds_that_meet_each_target(monkeypatch):
    ratios = {0: (0.97, 1.02), 1: (0.93, 0.96), 2: (1.01, 0.90)}  # seed -> (throughput, P99) vs Preble

    def fake_run(job):
        w, sc, d, seed = job
        thr, p99 = ratios[seed]
        return {"cell": f"{w} {sc} D={d}", "seed": seed, "vs_preble": thr, "wb_p99": 10 * p99,
                "preble_wb_p99": 10.0, "p99_ratio": p99, "jain": 0.9 + seed / 100, "preble_jain": 0.5}

    monkeypatch.setattr(st, "_seed_run", fake_run)
    checks = [{"cell": "tot s2 D=4", "workload": "tot", "scenario": "s2", "D": 4, "min_vs_preble": 0.95}]
    rows, table = st.seed_spread(checks, seeds=3)
    assert [r["seed"] for r in rows] == [0, 1, 2]
    assert ("| tot s2 D=4 | 0.970 (0.930-1.010) | 2 of 3 (>= 0.95) | 0.960 (0.900-1.020) | 1 of 3 "
            "| 0.900-0.920 | 0.500-0.500 |") in table
