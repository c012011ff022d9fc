"""`run --launch`: the bench starts its own tiny CPU server with the policy
(python -m sglang_fair.launch_server), replays, and stops it; and a scenario of another
vocabulary replayed on the real engine."""

import json

import pytest

from sglang_fair.bench.__main__ import EXIT_OK, EXIT_VIOLATION, main

pytestmark = pytest.mark.server


def test_launch_runs_the_policy_and_stops_the_server(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--workload", "synthetic", "--scenario", "fig4", "--set", "duration=null",
                 "--num-programs", "3", "--set", "rate=5", "--set", "input_tokens=16",
                 "--set", "output_tokens=4", "--policy", "vtc", "--launch", "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    err = captured.err
    assert code == EXIT_OK, err
    s = json.loads((out / "summary.json").read_text())
    assert s["run"]["backend"] == "launch" and s["run"]["policy"] == "vtc"
    assert s["overall"]["requests_ok"] == 9
    assert s["run"]["backend_meta"]["url"].startswith("http://127.0.0.1:")
    assert "POST /generate" in (out / "server.log").read_text()  # the server's log stays with the run
    # The launched server reports admission times, so the run can be audited.
    assert "fairness audit:" in captured.out and "fairness audit: not possible" not in captured.out
    assert main(["audit", str(out)]) in (EXIT_OK, EXIT_VIOLATION)  # audited: within the bound or not, never unauditable


def test_justitia_mix_replays_on_the_real_engine(tmp_path, capsys, lpm_server):
    """The scenario is written for a 32000-id vocabulary: against the tiny model (1024 ids)
    its ids are generated in the model's vocabulary, and every request is answered. (Against the
    session's shared server: the launch itself is the test above's.)"""
    out = tmp_path / "run"
    code = main(["run", "--workload", "apps", "--scenario", "justitia_mix", "--num-programs", "1",
                 "--policy", "lpm", "--backend", lpm_server.base_url, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_OK, err
    assert "its vocabulary (32000) is larger than the model's (1024 ids" in err
    s = json.loads((out / "summary.json").read_text())
    assert s["run"]["vocab_size"] == 1024 and s["run"]["model_vocab_size"] == 1024
    assert s["run"]["errors"] == [] and s["run"]["partial"] is False
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == s["overall"]["requests"] == s["overall"]["requests_ok"] > 0
    assert all(r["error"] is None for r in records)
