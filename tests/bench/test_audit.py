"""`python -m sglang_fair.bench audit`: exit codes, output, bad directories, simulated runs."""

import json
import random

import pytest

from sglang_fair.bench.__main__ import EXIT_BAD_INPUT, EXIT_OK, EXIT_VIOLATION, main
from sglang_fair.bench.output import write_run
from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.runs.records import RunResult
from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Call, Program, Workload
from tests.metrics.helpers import admitted, rec
from tests.metrics.test_bounds import params


def write(out_dir, records, **kw):
    result = RunResult(records=records, params=params(quantum=10.0, kv_pool_tokens=100) | kw)
    write_run(out_dir, result, {"policy": "dlpm"}, {}, ServiceWeights())
    return str(out_dir)


def hogging(out_dir):
    """a is admitted nine times while b waits on [0, 10]: a gap of 9 x 500 against a
    bound of 2 (w_e 500 + w_q M + Q^u 10) = 1020, M = 0 as no request outputs anything."""
    return write(out_dir, [admitted("a", 0, k, prompt=500) for k in range(1, 10)]
                 + [admitted("a", 0, 10, prompt=500), admitted("b", 0, 10, prompt=500)])


def alternating(out_dir):
    """a and b are admitted in turn while both wait: the gap is one request, 500 < 1020."""
    return write(out_dir, [admitted(c, 0, k, prompt=500) for k, c in enumerate("abababab", 1)]
                 + [admitted("a", 0, 10, prompt=500), admitted("b", 0, 10, prompt=500)])


def test_exit_status_is_1_when_a_run_exceeds_its_bound(tmp_path, capsys):
    assert main(["audit", hogging(tmp_path / "hog")]) == EXIT_VIOLATION
    out = capsys.readouterr().out
    assert "DLPM Theorem 4.1" in out and "VIOLATED" in out and "4,500.0" in out and "1,020.0" in out
    assert "a vs b, [0.000, 9.000] s" in out
    assert main(["audit", alternating(tmp_path / "alt")]) == EXIT_OK
    assert "within bound" in capsys.readouterr().out
    assert main(["audit", str(tmp_path / "alt"), str(tmp_path / "hog")]) == EXIT_VIOLATION  # any run violating


def test_json_output(tmp_path, capsys):
    assert main(["audit", "--json", hogging(tmp_path / "hog"), alternating(tmp_path / "alt")]) == EXIT_VIOLATION
    hog, alt = json.loads(capsys.readouterr().out)
    assert hog["violated"] and hog["observed"] == 4500 and hog["bound"]["value"] == 1020
    assert hog["ratio"] == pytest.approx(4500 / 1020) and hog["worst_pair"] == ["a", "b"]
    assert hog["worst_interval_s"] == [0, 9] and hog["bound"]["theorem"] is True
    assert not alt["violated"] and alt["observed"] == 500


@pytest.mark.parametrize("make, message", [
    (lambda d: d, "not a run directory (no summary.json)"),
    (lambda d: d / "missing", "not a directory"),
    (lambda d: write(d, [rec("a", 0, 1, 2), rec("b", 0, 1, 2)]), "no admission time (t_admitted)"),
    (lambda d: write(d, [admitted("a", 0, 1), admitted("a", 0, 2)]), "fewer than two clients"),
    (lambda d: write(d, [admitted("a", 0, 1), admitted("b", 0, 2)], kv_pool_tokens=None), "kv_pool_tokens"),
])
def test_directories_that_cannot_be_audited_exit_2_naming_the_problem(tmp_path, capsys, make, message):
    assert main(["audit", str(make(tmp_path))]) == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def test_summary_without_parameters_is_named(tmp_path, capsys):
    write_run(tmp_path, RunResult(records=[admitted("a", 0, 1), admitted("b", 0, 2)]), {}, {}, ServiceWeights())
    assert main(["audit", str(tmp_path)]) == EXIT_BAD_INPUT
    assert "no run.params" in capsys.readouterr().err


def test_simulated_dlpm_run_is_within_theorem_4_1(tmp_path, capsys):
    out = tmp_path / "tot-dlpm"
    # A small KV pool so that requests really wait for admission.
    assert main(["run", "--workload", "tot", "--scenario", "s1", "--num-programs", "2", "--policy", "dlpm",
                 "--backend", "sim", "--sim-opt", "kv_pool_tokens=6000", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    p = summary["run"]["params"]
    assert (p["policy"], p["num_workers"], p["kv_pool_tokens"], p["cost"], p["source"]) == (
        "dlpm", 1, 6000, "prefix-aware", "sim")
    assert summary["overall"]["max_backlogged_service_diff"] > 0
    capsys.readouterr()
    assert main(["audit", "--json", str(out)]) == EXIT_OK
    (audit,) = json.loads(capsys.readouterr().out)
    # Seen: 3,522 against 28,614.
    assert audit["bound"]["name"] == "DLPM Theorem 4.1" and 0 < audit["observed"] < audit["bound"]["value"]


def flood(bad_programs: int, seed: int = 0) -> Workload:
    """'bad' sends many shared-prefix fan-outs at once; two good clients send 8 each."""
    rng = random.Random(seed)
    progs = []
    for client, count in (("bad", bad_programs), ("good1", 8), ("good2", 8)):
        for k in range(count):
            prefix = tuple(rng.randrange(30000) for _ in range(600))
            calls = (Call(prefix, 16),) + tuple(
                Call(prefix + tuple(rng.randrange(30000) for _ in range(20)), 64, parents=(0,)) for _ in range(6))
            progs.append(Program(f"{client}/{k}", client, rng.uniform(0, 2), calls, well_behaved=client != "bad"))
    progs.sort(key=lambda p: p.arrival)
    return Workload("flood", progs)


@pytest.mark.parametrize("policy, expected", [("lpm", EXIT_VIOLATION), ("fcfs", EXIT_VIOLATION), ("dlpm", EXIT_OK)])
def test_flood_exceeds_the_dlpm_bound_under_lpm_and_fcfs_only(tmp_path, capsys, policy, expected):
    # Seen (observed / bound 53,336): lpm 171,540 (3.2x), fcfs 343,746 (6.4x), dlpm 4,724 (0.09x).
    result = SimBackend(policy=policy, kv_pool_tokens=12_000, lpm_queue_limit=10_000).run(flood(120), progress=False)
    assert not result.partial
    out = tmp_path / policy
    write_run(out, result, {"policy": policy}, {}, ServiceWeights())
    assert main(["audit", str(out)]) == expected
    text = capsys.readouterr().out
    bound = "DLPM Theorem 4.1" if policy == "dlpm" else f"reference: D²LPM shape ({policy} has no bound)"
    assert bound in text


def test_audit_fields_give_a_benchmark_row_the_gap_and_bound_or_the_reason(tmp_path):
    from sglang_fair.bench.audit import audit_fields

    hog = audit_fields(hogging(tmp_path / "hog"))
    assert (hog["gap"], hog["bound"], hog["within"], hog["theorem"]) == (4500.0, 1020.0, False, True)
    assert "DLPM Theorem 4.1" in hog["bound_name"] and tuple(hog["worst_pair"]) == ("a", "b")
    assert audit_fields(alternating(tmp_path / "alt"))["within"] is True
    assert "not a directory" in audit_fields(tmp_path / "missing")["audit_error"]
