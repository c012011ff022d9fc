"""benchmarks/speed/router_speed.py: a tiny run of each measurement (numbers are not judged here)."""

import argparse
import importlib.util
import itertools
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "speed" / "router_speed.py"
_spec = importlib.util.spec_from_file_location("router_speed", _PATH)
rs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rs)


def _args(**over) -> argparse.Namespace:
    base = dict(workers=4, requests=60, prefill_tokens=20_000, capacity=40_000, queue_depth=32, seed=0, backlog=24, block=20)
    base.update(over)
    return argparse.Namespace(**base)


def test_backlog_run_keeps_requests_held_and_places_them_on_completions():
    out = rs.measure_backlog("d2lpm_global", _args())
    assert out["held_min"] >= 1  # the timed phase really ran with a backlog
    assert 0 < out["p50_us"] <= out["p99_us"]
    assert 0 < out["finish_p50_us"] <= out["finish_p99_us"]


def test_a_router_is_timed_in_blocks_alternating_with_its_pair(monkeypatch):
    args = _args(requests=50)
    rr = rs.Load("round_robin", args)
    calls = []
    step = rs.Load.step

    def spy(self):
        calls.append(self.router.name)
        return step(self)

    monkeypatch.setattr(rs.Load, "step", spy)
    summary, theirs = rs.measure("d2lpm", args, paired=rr)
    assert len(theirs) == 50 and summary["p50_us"] > 0
    timed = calls[-100:]  # the calls before are d2lpm's index prefill
    blocks = [(name, len(list(run))) for name, run in itertools.groupby(timed)]
    assert blocks == [("d2lpm", 20), ("round_robin", 20)] * 2 + [("d2lpm", 10), ("round_robin", 10)]


def test_main_prints_every_router_and_the_backlog_line(capsys):
    rs.main(["--quick", "--workers", "4", "--routers", "round_robin,d2lpm,d2lpm_global"])
    out = capsys.readouterr().out
    for row in ("round_robin", "d2lpm ", "d2lpm_global holding", "d2lpm p50"):
        assert row in out


def test_a_baseline_index_gets_a_row_of_its_own(capsys):
    oracle = Path(__file__).resolve().parents[1] / "router" / "token_tree_oracle.py"
    rs.main(["--quick", "--workers", "4", "--routers", "round_robin,d2lpm", "--backlog", "0",
             "--baseline-index", str(oracle)])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    baseline = [row for row in rows if row and row[0] == "d2lpm@baseline"]
    assert len(baseline) == 1 and float(baseline[0][1]) > 0  # its p50, measured


def test_floors_time_the_compare_against_a_whole_shared_prefix():
    out = rs.floors(_args(capacity=1_000_000))  # room for all 256 shared prefixes
    # Every timed compare matched a whole shared prefix (PromptSource: 1,024-3,072 tokens).
    assert 1024 <= out["compare_tokens"] <= 3072
    assert out["compare"] > 0 and out["pack"] > 0


def test_progress_is_reported_after_each_decode_step_as_the_schedulers_do(monkeypatch):
    from sglang_fair.binding.scheduler.router_reports import PROGRESS_EVERY_TOKENS
    from sglang_fair.router.global_dlpm import GlobalDLPMRouter

    seen: dict[str, list[int]] = {}
    progress = GlobalDLPMRouter.on_progress

    def spy(self, rid, worker, out):
        assert self.inflight[rid].worker == worker  # its own running request
        seen.setdefault(rid, []).append(out)
        return progress(self, rid, worker, out)

    monkeypatch.setattr(GlobalDLPMRouter, "on_progress", spy)
    out = rs.measure_backlog("d2lpm_global", _args())  # the script's default interval: the schedulers'
    # router_reports.py's rule: the first token at once, then every PROGRESS_EVERY_TOKENS tokens.
    every = PROGRESS_EVERY_TOKENS
    assert seen and all(reports == list(range(1, reports[-1] + 1, every)) for reports in seen.values())
    assert out["progress_reports"] > 1 and 0 < out["request_p50_us"] <= out["request_p99_us"]


def test_a_requests_whole_cost_counts_each_router_call_once():
    """The router's time per arrival is every timed call's; the requests' whole costs add up to it
    (an admission a completion causes is its own request's, not the completion's again)."""
    load = rs.Backlog("d2lpm_global", _args())
    before = sum(load.cost.values())  # what the requests in flight cost during the warm-up
    for _ in range(120):
        load.one()
    total_ns = load.busy_ns
    assert len(load.samples["whole"]) > 50
    attributed = sum(load.samples["whole"]) + sum(load.cost.values()) - before  # finished + still in flight
    assert attributed == total_ns
    summary = load.summary()
    assert summary["busy_per_request_us"] == pytest.approx(total_ns / 120 / 1000)


def test_the_default_routers_targets_are_judged(capsys):
    code = rs.main(["--quick", "--workers", "4", "--routers", "round_robin,d2lpm_global",
                    "--target-default-p99-us", "1e9", "--target-completion-p99-us", "1e9",
                    "--target-request-p50-us", "1e-3"])
    out = capsys.readouterr().out
    assert "d2lpm_global (default) route p99" in out and "completion + admission p99" in out
    assert "whole cost per request p50" in out and "target 0.001 us: FAIL" in out and code == 1
