"""The GPU check's verdict logic, and the whole check on the tiny CPU model."""

from __future__ import annotations

import json

import pytest

from sglang_fair.bench import gpu_check
from sglang_fair.bench.gpu_check import RunResult, judge


def _run(system: str, throughput: float = 100.0, failed: int = 0, violated: bool = False,
         checked: bool = True) -> RunResult:
    return RunResult(system, 40, failed, throughput, violated, checked)


def test_the_verdict_passes_a_fair_run_at_the_stock_throughput() -> None:
    verdict = judge([_run("dlpm-overlap", 95.0), _run("dlpm-normal", 91.0), _run("stock-lpm", 100.0, checked=False)], 0.9)
    assert verdict.passed and verdict.reasons == []


@pytest.mark.parametrize("runs, reason", [
    ([_run("dlpm-overlap", 80.0), _run("dlpm-normal"), _run("stock-lpm")], "dlpm-overlap: throughput 0.80x"),
    ([_run("dlpm-overlap"), _run("dlpm-normal", failed=3), _run("stock-lpm")], "dlpm-normal: 3 of 40 requests failed"),
    ([_run("dlpm-overlap", violated=True), _run("dlpm-normal"), _run("stock-lpm")], "beyond the fairness bound"),
    ([_run("dlpm-overlap", checked=False), _run("dlpm-normal"), _run("stock-lpm")], "could not be audited"),
    ([_run("dlpm-overlap"), _run("dlpm-normal")], "no stock throughput"),
])
def test_the_verdict_fails_naming_why(runs: list[RunResult], reason: str) -> None:
    verdict = judge(runs, 0.9)
    assert not verdict.passed
    assert any(reason in r for r in verdict.reasons), verdict.reasons


def test_without_cuda_the_gpu_check_says_it_cannot_run(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setattr(gpu_check, "_cuda_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path)]) == gpu_check.EXIT_CANNOT_RUN
    assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.server
def test_the_gpu_check_runs_on_the_tiny_cpu_model(tmp_path, capsys) -> None:
    # Throughput on a shared 2-core machine is too noisy for the 0.9 ratio: the ratio's logic is
    # tested above; here every run must be answered in full and audited.
    code = gpu_check.main(["--device", "cpu", "--programs", "1", "--min-throughput-ratio", "0",
                           "--out", str(tmp_path)])
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert [run["system"] for run in verdict["runs"]] == ["dlpm-overlap", "dlpm-normal", "stock-lpm"]
    for run in verdict["runs"]:
        assert run["requests"] > 0 and run["failed"] == 0 and run["throughput"] > 0, run
    assert all(run["audit_checked"] and not run["audit_violated"] for run in verdict["runs"][:2])
    assert code == gpu_check.EXIT_PASS and verdict["passed"], verdict["reasons"]
    assert "gpu check (cpu, tiny): PASS" in capsys.readouterr().out
