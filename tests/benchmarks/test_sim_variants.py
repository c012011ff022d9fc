"""benchmarks/experiments/sim_variants.py: a short cell under two variants, with the hold probe."""

import importlib.util
import logging
import re
from pathlib import Path

import pytest

from sglang_fair.bench.paper_grid import paper_workload, run_one

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "experiments" / "sim_variants.py"
_spec = importlib.util.spec_from_file_location("sim_variants", _PATH)
sv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sv)


def test_probe_reports_each_variant():
    lines: list[str] = []
    args = sv.argparse.Namespace(cell="judge-s2-2", seeds=[0], variants=["preble", "d2lpm"], kv_pool=20_000,
                                 duration=3.0, why_held=True, per_client=False)
    sv.run(args, lines.append)
    rows = {line.split()[1]: line.split() for line in lines if line.split()[:1] == ["0"]}
    assert set(rows) == {"preble", "d2lpm"}
    assert rows["preble"][3] == "1.000" and float(rows["d2lpm"][2]) > 0
    probe = [line for line in lines if line.startswith("  prompt tokens cached at arrival")]
    assert len(probe) == 1  # only the d2lpm_global variant is probed
    arrival, admission = map(float, re.search(r"any worker\) ([\d.]+), at admission ([\d.]+)", probe[0]).groups())
    assert 0 < arrival <= 1 and 0 < admission <= 1  # a 20k-token pool still caches the judge's articles


def test_hold_reasons_add_up_to_the_time_held():
    probe = sv.HoldProbe()
    row = run_one(paper_workload("judge", "s2", 2, seed=1, duration=3.0), "dlpm", "d2lpm_global", 2, seed=1,
                  keep_records=True, kv_pool_tokens=20_000, router_observer=probe)
    probe.admitted(row["records"])
    placed = [r for r in probe.requests.values() if "t_placed" in r]
    assert placed and all("admitted" in r for r in placed)
    for r in placed:
        # Sampled after every placement pass, so each request's reasons cover its whole hold.
        assert sum(r["held"].values()) == pytest.approx(r["t_placed"] - r["t_arrival"], abs=1e-9)


def test_cell_variants_and_added_options_are_checked(capsys):
    for argv in (["--cell", "judge-s2"], ["--cell", "judge-s2-1"], ["--cell", "judge-s2-2", "--variants", "nope"],
                 ["--cell", "judge-s2-2", "--add", "b={local_queue_tokens: 1}"],
                 ["--cell", "judge-s2-2", "--add", "b=[1]"]):
        with pytest.raises(SystemExit):
            sv.main(argv)
    err = capsys.readouterr().err
    assert "unknown variant(s) nope" in err and "must be a JSON object" in err and "expected NAME={...}" in err


def test_an_added_variant_runs_the_default_router_with_its_options(capsys):
    logging_before = logging.root.manager.disable
    sv.main(["--cell", "judge-s2-2", "--seeds", "0", "--variants", "d2lpm", "--duration", "3", "--kv-pool", "20000",
             "--add", 'q8k={"local_queue_tokens": 8192}'])
    out = capsys.readouterr().out
    assert 'q8k = the default router with {"local_queue_tokens": 8192}' in out
    assert any(line.split()[:2] == ["0", "q8k"] for line in out.splitlines())
    assert "q8k" not in sv.VARIANTS  # added for that run only
    assert logging.root.manager.disable == logging_before  # its silencing ends with the run


def _record(client: str, t_sent: float, t_admitted: float, t_done: float, prompt: int) -> "RequestRecord":
    from sglang_fair.runs.records import RequestRecord
    return RequestRecord(rid=f"{client}-{t_sent}", client=client, program_id=client, call_index=0, well_behaved=True,
                         t_sent=t_sent, t_first_token=t_admitted, t_done=t_done, prompt_tokens=prompt,
                         cached_tokens=0, output_tokens=0, t_admitted=t_admitted)


def test_client_lines_give_rates_waiting_latency_and_both_jains():
    # a: 100 tokens at t=1 and again at t=3; b: 200 at t=2, then nothing until its last at t=9.
    records = [_record("a", 0.0, 1.0, 1.0, 100), _record("a", 0.0, 3.0, 3.0, 100),
               _record("b", 0.0, 2.0, 2.0, 200), _record("b", 0.0, 9.0, 9.0, 400)]
    lines = sv.client_lines(records, arrivals_s=4.0)
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:3]}
    # The all-active interval is [0, 3] (a's last request ends it): a got 200 tokens in it, b 200.
    assert rows["a"][:2] == ["67", "1.00"] and rows["b"][:2] == ["67", "1.00"]
    assert rows["a"][2:] == ["2.0s", "3.0s"] and rows["b"][2:] == ["5.5s", "9.0s"]
    assert "Jain 1.000 over the all-active interval [0.0, 3.0] s" in lines[3]
    assert "1.000 over the arrivals [0, 4] s" in lines[3]  # 200 tokens each by t=4 as well
    late = sv.client_lines(records, arrivals_s=10.0)[3]
    assert late.endswith("0.800 over the arrivals [0, 10] s")  # with b's last 400 tokens: 200 vs 600


def test_a_profile_is_checked_and_runs_the_cell_on_it(capsys):
    with pytest.raises(SystemExit):
        sv.main(["--cell", "judge-s2-2", "--profile", "a100-nope"])
    assert "unknown simulator profile 'a100-nope'" in capsys.readouterr().err
    outs = {}
    for profile in ("h100-llama-3.1-8b", "h200-llama-3.1-8b"):
        sv.main(["--cell", "judge-s2-2", "--seeds", "0", "--variants", "vtc,d2lpm", "--duration", "3",
                 "--kv-pool", "20000", "--profile", profile])
        out = capsys.readouterr().out
        assert f"simulator profile {profile}" in out
        outs[profile] = {line.split()[1]: float(line.split()[2]) for line in out.splitlines()
                         if line.split()[:1] == ["0"]}
    assert set(outs["h100-llama-3.1-8b"]) == {"vtc", "d2lpm"}
    # The H200 decodes faster (more memory bandwidth): the same arrivals are served sooner.
    assert all(outs["h200-llama-3.1-8b"][v] > outs["h100-llama-3.1-8b"][v] for v in ("vtc", "d2lpm"))


def test_a_router_that_tells_no_observer_is_refused():
    with pytest.raises(ValueError, match="tells no observer"):
        run_one(paper_workload("judge", "s2", 2, seed=0, duration=1.0), "lpm", "preble", 2, seed=0,
                kv_pool_tokens=20_000, router_observer=sv.HoldProbe())
