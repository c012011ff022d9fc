"""The replay client and the bench command against the real SGLang server on
CPU (tiny random-weight model): the session's shared LPM server."""

import json

import pytest

from sglang_fair.bench.__main__ import EXIT_OK, main
from sglang_fair.bench.http_backend import HttpBackend
from sglang_fair.workloads.model import Call, Program, Workload
from sglang_fair.workloads.registry import build_workload
from sglang_fair.workloads.spec import parse_scenario

pytestmark = pytest.mark.server


@pytest.fixture
def server(lpm_server):
    return lpm_server  # the shared SGLang server under --schedule-policy lpm (tests/conftest.py)


def tot_workload(branches=2, height=2, programs=2):
    return build_workload(parse_scenario({
        "workload": "tot", "seed": 1, "vocab_size": 1024,
        "defaults": {"num_programs": programs, "rate": 20.0, "arrival": "uniform", "height": height,
                     "branches": branches, "template_tokens": 40, "question_tokens": 20, "question_cv": 0,
                     "step_tokens": 4, "thought_tokens": 8},
        "clients": [{"name": "bad", "well_behaved": False, "question_scale": 3}, {"name": "good"}],
    }))


@pytest.mark.parametrize("api", ["generate", "openai"])
def test_tot_replay_honours_dependencies_and_extends_parents(server, api):
    wl = tot_workload()
    result = HttpBackend(server.base_url, api=api, timeout_s=120).run(wl, progress=False)
    assert not result.partial, result.errors or [r.error for r in result.records if r.error]
    recs = {r.rid: r for r in result.records}
    assert len(recs) == wl.num_calls() == 2 * 2 * (2 + 4)
    for p in wl.programs:
        for i, call in enumerate(p.calls):
            r = recs[f"{p.program_id}-{i}"]
            assert r.output_tokens == call.max_new_tokens
            assert r.t_sent <= r.t_first_token <= r.t_done
            if call.parents:
                parent = recs[f"{p.program_id}-{call.parents[0]}"]
                assert r.t_sent >= parent.t_done  # sent only after the parent finished
                assert r.prompt_tokens == parent.prompt_tokens + parent.output_tokens + len(call.tokens)
            else:
                assert r.prompt_tokens == len(call.tokens)
    if api == "generate":
        # the children extend the parent's exact ids, so the radix cache serves the shared prefix
        children = [r for r in result.records if r.call_index >= 2]
        assert all(r.cached_tokens and r.cached_tokens > 0 for r in children)


def test_bad_request_becomes_an_error_record(server):
    # a prompt longer than the tiny model's context: the server answers with an error
    wl = Workload(name="t", programs=[
        Program("long", "c", 0.0, (Call(tokens=tuple(range(1000)) * 3, max_new_tokens=4),
                                   Call(tokens=(1,), max_new_tokens=4, parents=(0,), extends_parent=True))),
        Program("fine", "c", 0.0, (Call(tokens=(1, 2, 3), max_new_tokens=4),)),
    ])
    result = HttpBackend(server.base_url, timeout_s=60).run(wl, progress=False)
    recs = {r.rid: r for r in result.records}
    assert result.partial and len(recs) == 3
    assert recs["long-0"].error.startswith("server error")
    assert recs["long-1"].error == "parent failed: long-0"
    assert recs["fine-0"].ok


def test_bench_cli_end_to_end(server, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--workload", "chat", "--scenario", "base", "--set", "source=synthetic",
                 "--num-programs", "2", "--set", "rate=5", "--policy", "lpm", "--backend", server.base_url,
                 "--out", str(out), "--no-progress"])
    assert code == EXIT_OK, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert s["run"]["partial"] is False and s["run"]["policy"] == "lpm"
    assert s["overall"]["requests_ok"] == s["overall"]["requests"] > 0
    assert s["overall"]["cache_hit_rate"] is not None
    assert set(s["clients"]) == {"client-0", "client-1", "client-2", "client-3"}


@pytest.mark.parametrize("text", [True, False])
def test_the_flood_traffic_gets_one_answer_per_request(server, text, tmp_path):
    """sglang_fair.bench.flood against the real server: idle phase, flood, light chains beside it;
    with text prompts also streamed, every request recorded in the run directory."""
    import asyncio

    from sglang_fair.bench.flood import Shape, run_flood
    from sglang_fair.bench.output import read_records, read_summary

    shape = Shape(flood=12, connections=4, prefix=64, tail=4, output=4, light_tenants=2, light_input=8,
                  light_output=2, chain=2, idle_requests=2, think_s=0.05, text=text)
    rep = asyncio.run(run_flood(server.base_url, shape, seed=0, run_dir=tmp_path / "run" if text else None))
    assert rep.answered == rep.sent
    _check_counts(rep, shape)
    if not text:
        assert rep.audit is None and not (tmp_path / "run").exists()
        return
    records = read_records(tmp_path / "run")
    assert len(records) == rep.sent and len({r.rid for r in records}) == rep.sent
    assert all(r.ok and r.progress and r.progress[-1][1] == r.output_tokens for r in records)
    assert sum(r.output_tokens for r in records) == rep.output_tokens
    assert read_summary(tmp_path / "run")["clients"]["flooder"]["well_behaved"] is False
    # This server runs without --enable-metrics: no admission times, and the audit says so.
    assert "no admission time" in rep.audit["audit_error"]


def _check_counts(rep, shape) -> None:
    assert set(rep.idle) == set(rep.flooded) == {"light-0", "light-1"}
    assert all(len(values) == 2 for values in rep.idle.values())
    assert all(len(values) >= 1 for values in rep.flooded.values())
    chains = sum(len(v) for v in rep.idle.values()) + sum(len(v) for v in rep.flooded.values())
    assert rep.sent == shape.flood + shape.chain * chains
    assert rep.flood_tokens == shape.flood * shape.output
    assert rep.makespan_s > 0 and 0 < rep.hit_rate < 1  # the flood's shared prefix is found cached
