"""The `python -m sglang_fair.bench` command: bad input, partial runs, compare."""

import json

import pytest

from sglang_fair.bench.__main__ import EXIT_BAD_INPUT, EXIT_PARTIAL, main
from sglang_fair.bench.output import write_run
from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.runs.records import RunResult
from tests.bench.fake_server import free_port
from tests.metrics.helpers import rec


@pytest.mark.parametrize("argv, message", [
    (["--workload", "tot", "--scenario", "s7"], "unknown scenario 's7'"),
    (["--workload", "tot", "--scenario", "s2", "--set", "branches=0"], "branches must be an integer > 0"),
    (["--workload", "synthetic", "--scenario", "fig4", "--set", "rate=-2"], "rate must be a positive"),
    (["--workload", "tot", "--scenario", "s2", "--num-programs", "0"], "--num-programs must be >= 1"),
    (["--workload", "tot", "--scenario", "s2", "--misbehaving", "zed"], "unknown clients"),
    (["--workload", "tot"], "give --workload and --scenario"),
    (["--workload", "tot", "--scenario", "s2", "--backend", "ftp://x"], "unknown backend 'ftp://x'"),
    (["--trace", "/nonexistent.jsonl"], "/nonexistent.jsonl: cannot read"),
])
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, argv, message):
    argv = ["run", "--out", str(tmp_path / "out"), *argv]
    if "--backend" not in argv:
        argv += ["--backend", "http://127.0.0.1:1"]
    assert main(argv) == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_workload_rejected_by_parser(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--workload", "nope", "--scenario", "x", "--out", "/tmp/x"])
    assert e.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


def test_unreachable_server_writes_partial_results(tmp_path, capsys):
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}"
    code = main(["run", "--workload", "tot", "--scenario", "s2", "--num-programs", "1", "--policy", "lpm",
                 "--backend", url, "--out", str(out), "--no-progress"])
    assert code == EXIT_PARTIAL
    assert "unreachable" in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["partial"] is True and summary["run"]["policy"] == "lpm"
    assert summary["overall"]["requests"] == 4 * 30 and summary["overall"]["requests_ok"] == 0
    assert summary["clients"]["bad"]["well_behaved"] is False
    assert len((out / "records.jsonl").read_text().splitlines()) == 120


def fake_run(out_dir, scale):
    records = [rec("a", 0, 1, 4 * scale, prompt=100, out=10, cached=50, program="a1"),
               rec("b", 0, 2, 5 * scale, prompt=100, out=10, cached=0, program="b1", wb=False)]
    return write_run(out_dir, RunResult(records=records), {"policy": f"p{scale}", "scenario_name": "t"},
                     {"a": True, "b": False}, ServiceWeights())


def test_write_run_files_and_compare(tmp_path, capsys):
    fake_run(tmp_path / "r1", 1)
    fake_run(tmp_path / "r2", 2)
    for name in ("summary.json", "records.jsonl", "timeline.csv", "response_time.png", "service_rate.png",
                 "cumulative_service.png"):
        assert (tmp_path / "r1" / name).stat().st_size > 0
    header = (tmp_path / "r1" / "timeline.csv").read_text().splitlines()[0]
    assert header == "window_start_s,window_end_s,client,service_rate,cumulative_service,outstanding"
    plot = tmp_path / "cmp.png"
    assert main(["compare", str(tmp_path / "r1"), str(tmp_path / "r2"), "--out", str(plot)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| run ") and len(table) == 4
    assert "| r1 " in table[2] and "| p1 " in table[2] and "| r2 " in table[3]
    assert plot.stat().st_size > 0


def test_summarize_recomputes_with_other_weights(tmp_path):
    fake_run(tmp_path / "r", 1)
    assert main(["summarize", str(tmp_path / "r"), "--w-output", "0", "--input-mode", "extend"]) == 0
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["overall"]["service"] == 50 + 100
    assert s["run"]["policy"] == "p1" and s["clients"]["b"]["well_behaved"] is False


class _DeadServer:
    """Stands in for LocalServer: a server process that died during the run."""

    def __init__(self, url):
        self.base_url = url
        self.log_path = "/tmp/server.log"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def poll(self):
        return 1


def test_launched_server_that_died_marks_the_run_partial(tmp_path, capsys, monkeypatch):
    import sglang_fair.bench.__main__ as cli

    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(cli, "_launch", lambda args: _DeadServer(url))
    out = tmp_path / "run"
    code = main(["run", "--workload", "tot", "--scenario", "s2", "--num-programs", "1", "--policy", "vtc",
                 "--launch", "--out", str(out), "--no-progress"])
    assert code == EXIT_PARTIAL
    s = json.loads((out / "summary.json").read_text())
    assert any("launched server exited with code 1" in e for e in s["run"]["errors"])
    assert s["run"]["backend"] == "launch"


def test_a_run_whose_only_failures_are_policy_refusals_is_complete(tmp_path, capsys):
    config = "{policy_config: {fairserve: {user_limit: 1, window_s: 600, overload_kv_usage: 0.0}}}"
    code = main(["run", "--workload", "tot", "--scenario", "s2", "--num-programs", "2", "--policy", "fairserve",
                 "--backend", "sim", "--sim-opt", f"fair={config}", "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "refused by the server's policy (HTTP 429)" in err and "PARTIAL" not in err


# Against a server, the token ids are fitted to its model before the first request
# (sglang_fair/bench/model_vocab.py); the model's vocabulary is stubbed here, the real
# engine's is read in test_cli_launch.py.
def _model_with(monkeypatch, size):
    import sglang_fair.bench.__main__ as cli
    from sglang_fair.bench.model_vocab import ModelVocab

    monkeypatch.setattr(cli, "read_model_vocab", lambda url: ModelVocab(size, "model tiny"))


JUSTITIA_MIX = ["run", "--workload", "apps", "--scenario", "justitia_mix", "--num-programs", "1", "--no-progress"]


def test_a_scenario_larger_than_the_model_is_generated_with_its_vocabulary(tmp_path, capsys, monkeypatch):
    _model_with(monkeypatch, 1024)
    out = tmp_path / "run"
    code = main([*JUSTITIA_MIX, "--backend", f"http://127.0.0.1:{free_port()}", "--out", str(out)])
    assert code == EXIT_PARTIAL  # nothing listens there: only the vocabulary is under test
    err = capsys.readouterr().err
    assert "its vocabulary (32000) is larger than the model's (1024 ids" in err
    run = json.loads((out / "summary.json").read_text())["run"]
    assert run["vocab_size"] == 1024 and run["model_vocab_size"] == 1024


@pytest.mark.parametrize("flags", [["--vocab-size", "32000"], ["--set", "vocab_size=32000"]])
def test_a_vocabulary_given_that_the_model_lacks_is_refused_before_any_request(tmp_path, capsys, monkeypatch,
                                                                                flags):
    _model_with(monkeypatch, 1024)
    code = main([*JUSTITIA_MIX, *flags, "--backend", "http://127.0.0.1:1", "--out", str(tmp_path / "out")])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "32000" in err and "1024 ids" in err and "--vocab-size 1024" in err
    assert not (tmp_path / "out").exists()


def test_vocab_size_is_accepted_for_a_scenario(tmp_path, capsys, monkeypatch):
    _model_with(monkeypatch, 1024)
    out = tmp_path / "run"
    assert main([*JUSTITIA_MIX, "--set", "vocab_size=512", "--backend", f"http://127.0.0.1:{free_port()}",
                 "--out", str(out)]) == EXIT_PARTIAL
    assert "larger than the model's" not in capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text())["run"]["vocab_size"] == 512


@pytest.mark.parametrize("extra, message", [
    (["--vocab-size", "1024", "--set", "vocab_size=512"], "--vocab-size 1024 and --set vocab_size=512 disagree"),
    (["--set", "vocab_size=1"], "vocab_size override must be an integer >= 2"),
])
def test_bad_vocabulary_options_exit_2(tmp_path, capsys, extra, message):
    assert main([*JUSTITIA_MIX, *extra, "--backend", "http://127.0.0.1:1", "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


def test_a_trace_with_ids_past_the_model_vocabulary_is_refused(tmp_path, capsys, monkeypatch):
    _model_with(monkeypatch, 1024)
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,client,prompt,token_ids,output_len\n0.0,alice,,17 29648,8\n")
    code = main(["run", "--trace", str(trace), "--vocab-size", "32000", "--backend", "http://127.0.0.1:1",
                 "--out", str(tmp_path / "out"), "--no-progress"])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "has token id 29648 (vocabulary 32000), outside the model's vocabulary of 1024 ids" in err
    assert not (tmp_path / "out").exists()


def test_scenario_options_are_refused_with_a_trace(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,client,prompt,token_ids,output_len\n0.0,alice,hello,,8\n")
    assert main(["run", "--trace", str(trace), "--set", "rate=2", "--backend", "http://127.0.0.1:1",
                 "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    assert "a --trace is replayed as it is" in capsys.readouterr().err
