"""benchmarks/experiments/sim_trends.py: the grid's systems and target checks (no grid is run)."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "experiments" / "sim_trends.py"
_spec = importlib.util.spec_from_file_location("sim_trends", _PATH)
st = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(st)


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
