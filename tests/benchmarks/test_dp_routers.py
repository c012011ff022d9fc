"""benchmarks/experiments/dp_routers.py: the table and checks of the real-engine router comparison (no server is started)."""

import importlib.util
from pathlib import Path

import pytest

from sglang_fair.workloads.registry import make_workload

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "experiments" / "dp_routers.py"
_spec = importlib.util.spec_from_file_location("dp_routers", _PATH)
dp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp)


def _row(throughput: float, wb_p99: float, gap: float = 1.0, bound: float = 10.0, theorem: bool = True) -> dict:
    return {"run_dir": "x", "router": "r", "makespan_s": 50.0, "throughput": throughput, "hit_rate": 0.9,
            "jain": 0.6, "light_share": 0.3, "wb_p50": wb_p99 / 2, "wb_p99": wb_p99, "workers_per_client": {},
            "gap": gap, "bound": bound, "bound_name": "B", "theorem": theorem, "within": gap <= bound}


def test_ratios_to_preble_are_taken_per_repetition_then_the_median():
    # Repetition 2 ran on a slow machine for both: per-repetition ratios ignore the spell.
    rows = {"preble": [_row(100, 10), _row(50, 20), _row(100, 10)],
            "d2lpm": [_row(97, 9), _row(48, 19), _row(99, 30)]}
    table = dp.summarize(rows)
    assert table["d2lpm"]["throughput_vs_peer"] == pytest.approx(0.97)
    assert table["d2lpm"]["wb_p99_vs_peer"] == pytest.approx(0.95)
    assert table["d2lpm"]["throughput"] == 97  # medians, not means
    checks = dict((label.split(" ")[1], ok) for label, ok in dp.checks(table))
    assert checks == {"throughput": True, "well-behaved": True, "within": True}


def test_checks_fail_on_a_slower_router_or_any_repetition_over_its_bound():
    rows = {"preble": [_row(100, 10)] * 3, "d2lpm": [_row(90, 12), _row(90, 12), _row(90, 12, gap=11)]}
    table = dp.summarize(rows)
    assert table["d2lpm"]["audit_ratio"] == pytest.approx(1.1) and table["d2lpm"]["audit_within"] is False
    assert [ok for _, ok in dp.checks(table)] == [False, False, False]
    # A reference bound (no theorem) never passes as the default router's guarantee.
    rows["d2lpm"] = [_row(100, 10, theorem=False)] * 3
    assert dp.checks(dp.summarize(rows))[2][1] is False
    assert "FAIL" in dp.format_table(table, 3) and "d2lpm" in dp.format_table(table, 3)


def test_no_checks_without_the_default_router_and_its_peer():
    assert dp.checks(dp.summarize({"preble": [_row(100, 10)]})) == []


def test_the_workload_has_a_misbehaving_flood_and_light_clients_with_documents_of_their_own():
    wl = make_workload("apps", "dp", {}, 0)
    flags = {p.client: p.well_behaved for p in wl.programs}
    assert flags == {"flooder": False, "light-a": True, "light-b": True}
    firsts = {p.client: p.calls[0].tokens[:1024] for p in wl.programs if p.client != "flooder"}
    assert firsts["light-a"] != firsts["light-b"]  # each light client reads its own document
    assert {p.kind for p in wl.programs if p.client == "flooder"} == {"agent-a", "agent-b", "agent-c", "agent-d"}


def test_a_saved_run_is_reprinted_without_running_anything(tmp_path, capsys):
    import json

    saved = {"reps": 1, "rows": {"preble": [_row(100, 10)], "d2lpm": [_row(99, 9)]}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(saved))
    assert dp.main(["--from-json", str(path), "--plot", str(tmp_path / "run.png")]) == 0
    out = capsys.readouterr().out
    assert "d2lpm throughput / preble's 0.990 vs target >= 0.95: PASS" in out
    assert (tmp_path / "run.png").stat().st_size > 0
