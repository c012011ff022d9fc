"""FairServe's abuse scenario replayed on the real engine (``bench paper fairserve --figure
abuse-engine --quick``): two tiny CPU servers, one after the other; and the helpers that make the
replay fit the tiny model."""

from __future__ import annotations

import json

import pytest

from sglang_fair.bench.__main__ import main
from sglang_fair.bench.paper.apps_engine import ANSWERED_ONCE, answered_once, drop_unfit
from sglang_fair.bench.paper.claims import read_claims
from sglang_fair.runs.records import RequestRecord
from sglang_fair.workloads.model import Call, Program, Workload


@pytest.mark.server
def test_the_abuse_scenario_replays_on_the_real_engine(tmp_path, capsys):
    assert main(["paper", "fairserve", "--figure", "abuse-engine", "--quick", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    # the summarize users' 3,300-4,000-token prompts do not fit the 2,048-token context: dropped, and said so
    assert "dropped 2 of 16 calls (2 whole programs)" in err
    fig = tmp_path / "fairserve" / "figabuse-engine"
    engine = json.loads((fig / "engine.json").read_text())
    assert (engine["programs"], engine["calls"], engine["dropped_programs"]) == (8, 14, 2)
    assert list(engine["systems"]) == ["fairserve", "vtc"]
    for system, row in engine["systems"].items():
        assert row["requests"] == 14 and row["answered_once_share"] == 1.0 and not row["run_errors"], system
        assert row["ok"] + row["errors"] + row["throttled"] + row["not_sent"] == 14, system
        assert row["ok"] > 0 and row["mean_completion_s"] > 0, system
        assert (fig / system / "records.jsonl").stat().st_size > 0
        assert "Uvicorn running" in (fig / f"{system}-server.log").read_text()
    assert engine["systems"]["vtc"]["throttled"] == 0  # VTC never refuses
    (row,) = read_claims(fig / "claims.json")
    checks = {c["metric"]: c for c in row.checks}
    assert list(checks) == ["abuser's requests refused (share)", "benign users' requests refused (share)",
                            "benign P90 completion, FairServe / VTC", ANSWERED_ONCE]
    assert checks[ANSWERED_ONCE]["value"] == 1.0 and checks[ANSWERED_ONCE]["held"]
    assert row.setup.startswith("real SGLang ") and "refused (HTTP 429): fairserve " in row.reason
    assert (fig / "figabuse-engine.png").stat().st_size > 10_000


def _program(pid: str, prompts: list[int]) -> Program:
    calls = [Call(tokens=tuple(range(prompts[0])), max_new_tokens=8)]
    calls += [Call(tokens=tuple(range(n)), max_new_tokens=8, parents=(k,), extends_parent=True)
              for k, n in enumerate(prompts[1:])]
    return Program(pid, "c", 0.0, tuple(calls))


def test_calls_over_the_context_are_dropped_with_what_depends_on_them():
    wl = Workload("t", [_program("fits", [10, 10]), _program("second-too-long", [10, 100]),
                        _program("first-too-long", [200, 10])])
    kept, calls, programs = drop_unfit(wl, context=64)
    assert [p.program_id for p in kept.programs] == ["fits", "second-too-long"]
    assert len(kept.programs[1].calls) == 1
    assert (calls, programs) == (3, 1)


def test_a_call_with_two_records_or_none_is_not_answered_once():
    wl = Workload("t", [_program("p", [4, 4])])

    def rec(rid: str) -> RequestRecord:
        return RequestRecord(rid=rid, client="c", program_id="p", call_index=0, well_behaved=True, t_sent=0.0,
                             t_first_token=None, t_done=1.0, prompt_tokens=4, cached_tokens=None, output_tokens=8)

    assert answered_once(wl, [rec("p-0"), rec("p-1")]) == 1.0
    assert answered_once(wl, [rec("p-0"), rec("p-0"), rec("p-1")]) == 0.5
    assert answered_once(wl, [rec("p-0")]) == 0.5
    assert answered_once(wl, [rec("p-0"), rec("p-1"), rec("q-0")]) == 0.0  # a record of no call sent
