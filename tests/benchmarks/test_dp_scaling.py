"""benchmarks/experiments/dp_scaling.py and benchmarks/experiments/open_flood.py: tables and targets from given repetitions (no server)."""

import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from sglang_fair.bench.flood import Rep, Shape

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "experiments"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


scaling = _load("dp_scaling")
open_flood = _load("open_flood")


def _rep(makespan: float, idle: float, flooded: list[float], tokens: int = 25600, split: dict | None = None) -> Rep:
    rep = Rep(idle={"light-0": [idle] * 4}, flooded={"light-0": flooded}, makespan_s=makespan, flood_tokens=tokens,
              prompt_tokens=100, cached_tokens=80, workers={"flooder": split or {}})
    rep.sent = rep.answered = 10
    return rep


def test_dp_scaling_targets_are_ratios_of_medians_within_the_run():
    results = {"one-server": [_rep(100, 0.1, [1.0]), _rep(120, 0.1, [1.0]), _rep(110, 0.1, [1.0])],
               "one-core": [_rep(200, 0.1, [5.0])] * 3,
               "dp2": [_rep(105, 0.1, [0.5, 2.0])] * 3}
    cpu = {name: [{"ranks": 20.0, "http+tokenizer": 4.0, "detokenizer": 1.0, "controller": 1.0 if "dp" in name else 0.0,
                   "other": 0.0, "wall_s": r.makespan_s + 2} for r in reps] for name, reps in results.items()}
    table = scaling.summarize(results, cpu)
    assert table["one-server"]["makespan_s"] == 110  # the median, not the mean
    assert table["dp2"]["cpu_ms_per_token"]["controller"] == pytest.approx(1e3 / 25600)
    assert table["dp2"]["cores_busy"] == pytest.approx(26 / 107)  # every role, not the wall time
    assert table["dp2"]["light_p50_slowdown"] == pytest.approx(12.5)
    checks = {label: (value, target) for label, value, target, _ in scaling.checks(table)}
    assert checks["dp2 flood makespan / one-server's"] == (pytest.approx(105 / 110), 1.1)
    assert checks["dp2 output rate / one-core's"] == (pytest.approx(200 / 105), 1.8)
    text = scaling.format_table(table, Shape(), 3)
    assert "dp2 output rate / one-core's: 1.90 vs target >= 1.8: PASS" in text
    assert "dp2 flood makespan / one-server's: 0.95 vs target <= 1.1: PASS" in text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("system") and "controller" in line)
    assert lines[header + 3].split() == ["dp2", "0.78", "0.16", "0.04", "0.04", "0.00", "0.24"]
    table["dp2"]["makespan_s"] = 130
    assert "one-server's: 1.18 vs target <= 1.1: FAIL" in scaling.format_table(table, Shape(), 3)


def test_open_flood_slowdowns_are_each_tenants_own_and_the_checks_fail_when_missed():
    rep = _rep(60, 0.1, [0.2, 0.3], split={0: 150, 1: 250})
    rep.idle["light-1"], rep.flooded["light-1"] = [1.0] * 4, [2.0]
    p50, tail = open_flood._slowdowns(rep)
    assert p50 == pytest.approx(2.0) and tail == pytest.approx(3.0)  # ratios to each tenant's own idle
    table = open_flood.summarize({"d2lpm": [rep], "smg": [_rep(100, 0.1, [0.1])], "gie": [_rep(61, 0.1, [3.0])],
                                  "preble": [_rep(70, 0.1, [30.0])], "d2lpm-no-isolation": [_rep(65, 0.1, [2.0])]})
    assert table["d2lpm"]["flood_split"] == [250, 150]
    verdicts = {label: value <= target for label, value, target, _ in open_flood.checks(table, 64)}
    unaudited = "runs within their bound (worst gap / bound)"  # a run of ours without an audit fails
    assert verdicts == {"d2lpm makespan / smg's": True, "d2lpm light P99 / smg's": False,
                        "d2lpm makespan / gie's": True, "d2lpm light P99 / gie's": True,
                        "d2lpm light P99 / preble's": True,
                        "d2lpm-no-isolation makespan / smg's": True, "d2lpm-no-isolation light P99 / smg's": False,
                        "d2lpm-no-isolation makespan / gie's": False, "d2lpm-no-isolation light P99 / gie's": True,
                        "d2lpm-no-isolation light P99 / preble's": True,
                        f"d2lpm {unaudited}": False, f"d2lpm-no-isolation {unaudited}": False}
    # The makespan target against smg is 0.9 at 64 connections and 1.0 at 256.
    assert {label: target for label, _, target, _ in open_flood.checks(table, 64)}["d2lpm makespan / smg's"] == 0.9
    assert {label: target for label, _, target, _ in open_flood.checks(table, 256)}["d2lpm makespan / smg's"] == 1.0
    assert not open_flood.ours("gie") and not open_flood.ours("preble") and open_flood.ours("d2lpm")
    assert table["d2lpm"]["light_ttft_p99_s"] is None  # the servers reported no time to first token
    assert "FAIL" in open_flood.format_table(64, table, Shape(text=True), 1, open_flood.SERVER)
    theorem = {"gap": 10.0, "bound": 100.0, "bound_name": "Theorem G", "theorem": True, "within": True}
    rep.audit = theorem
    audited = {label: value for label, value, _, _ in open_flood.checks(open_flood.summarize({"d2lpm": [rep]}))}
    assert audited == {"d2lpm runs within Theorem G (worst gap / bound)": pytest.approx(0.1)}
    rep.audit = theorem | {"gap": 120.0, "within": False}
    violated = open_flood.checks(open_flood.summarize({"d2lpm": [rep]}))
    assert violated[0][1] > violated[0][2]


def test_open_flood_says_what_work_the_makespan_held_and_reads_a_saved_run_again(tmp_path, capsys):
    reps = {"d2lpm": [_rep(50, 0.1, [0.2]), _rep(52, 0.1, [0.2])], "smg": [_rep(48, 0.1, [9.0])] * 2}
    for rep, (answered, tokens, retracted) in zip(reps["d2lpm"], [(480, 27000, 60), (490, 27200, 50)]):
        rep.answered, rep.output_tokens, rep.retracted = answered, tokens, retracted
    reps["smg"][0].answered, reps["smg"][0].output_tokens = 420, 26000
    table = open_flood.summarize(reps)
    assert table["d2lpm"]["answered"] == 485 and table["d2lpm"]["retracted"] == 55
    assert table["d2lpm"]["all_tok_s"] == pytest.approx((27000 / 50 + 27200 / 52) / 2)  # the median of two
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"shape": asdict(Shape(text=True)), "server_args": open_flood.SERVER, "reps": 2,
                                 "repetitions": {"64": {n: [asdict(r) for r in rs] for n, rs in reps.items()}}}))
    assert open_flood.main(["--from-json", str(saved)]) == 0
    out = capsys.readouterr().out
    assert out == open_flood.format_table(64, table, Shape(text=True), 2, open_flood.SERVER) + "\n"
    row = next(line.split() for line in out.splitlines() if line.startswith("smg "))
    assert row[-4:] == ["420", f"{26000 / 48:.0f}", "0", "-"]  # answered, all tok/s, retracted, no split


def test_a_gateway_not_installed_is_skipped_with_a_message(monkeypatch, capsys):
    monkeypatch.setattr(open_flood, "gateway_missing", lambda kind: f"{kind} is not installed")
    with pytest.raises(SystemExit):
        open_flood.main(["--systems", "smg", "smg+priority", "sglang-router"])
    err = capsys.readouterr().err
    assert "skipping the smg systems: smg is not installed" in err
    assert "skipping the sglang-router systems: sglang-router is not installed" in err


def test_smg_with_priority_classes_holds_the_flooder_to_bulk():
    system = open_flood.SYSTEMS["smg+priority"]
    config = dict(system.files)["priority.yaml"]
    assert '"header:flooder": {max_class: bulk}' in config and "interactive: {reserved_floor: 4," in config
    assert "{priority.yaml}" in system.gateway and "--trust-tenant-header" in system.gateway


def test_open_flood_lane_systems_carry_their_budget_and_face_every_target_of_ours():
    import json

    args = open_flood.launcher_args("d2lpm+lane", 1234)
    assert args[:args.index("--fair-router-options")] == ["--policy", "dlpm", "--dp", "2"]
    assert json.loads(args[-1]) == {"lane_workers": 1, "lane_tokens": 1234}
    assert "--fair-router-options" not in open_flood.launcher_args("d2lpm-no-isolation", 1234)
    assert json.loads(open_flood.launcher_args("d2lpm+lane", 1234, 10.0)[-1])["lane_hold_s"] == 10.0
    table = open_flood.summarize({"d2lpm+lane": [_rep(60, 0.1, [0.5])], "smg": [_rep(100, 0.1, [0.1])],
                                  "preble": [_rep(70, 0.1, [30.0])]})
    verdicts = {label: value <= target for label, value, target, _ in open_flood.checks(table)}
    assert verdicts == {"d2lpm+lane makespan / smg's": True, "d2lpm+lane light P99 / smg's": False,
                        "d2lpm+lane light P99 / preble's": True,
                        "d2lpm+lane runs within their bound (worst gap / bound)": False}
