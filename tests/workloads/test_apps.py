"""The ``apps`` generator: application profiles, shapes, shared system prompts, bad input."""

import pytest

from sglang_fair.workloads.registry import build_workload, make_workload
from sglang_fair.workloads.spec import parse_scenario
from sglang_fair.workloads.validate import WorkloadError

AGENT = {"name": "agent", "calls": [3, 3], "input": [10, 20], "output": [5, 5], "system": 7, "shape": "sequential"}
FAN = {"name": "fan", "calls": [2, 4], "input": [10, 10], "output": [3, 9], "system": 7, "shape": "parallel"}
MR = {"name": "mr", "calls": [4, 4], "input": [5, 5], "output": [2, 2], "shape": "map_reduce"}


def workload(apps, clients=2, **common):
    raw = {"workload": "apps", "seed": 3, "vocab_size": 1000,
           "defaults": {"num_programs": 20, "rate": 2.0, "apps": apps, **common},
           "clients": [{"name": "u", "count": clients}]}
    return build_workload(parse_scenario(raw))


def test_shapes_kinds_and_token_ranges():
    wl = workload([AGENT, FAN, MR])
    kinds = {p.kind for p in wl.programs}
    assert kinds == {"agent", "fan", "mr"}
    for p in wl.programs:
        assert p.program_id.startswith(f"{p.client}/{p.kind}")
        if p.kind == "agent":
            assert [c.parents for c in p.calls] == [(), (0,), (1,)]
            assert [c.extends_parent for c in p.calls] == [False, True, True]
            assert 17 <= len(p.calls[0].tokens) <= 27 and all(10 <= len(c.tokens) <= 20 for c in p.calls[1:])
        elif p.kind == "fan":
            assert 2 <= len(p.calls) <= 4 and all(not c.parents and len(c.tokens) == 17 for c in p.calls)
            assert all(3 <= c.max_new_tokens <= 9 for c in p.calls)
        else:
            assert [c.parents for c in p.calls] == [(), (), (), (0, 1, 2)] and p.calls[3].extends_parent


def test_system_prompt_belongs_to_the_app_and_weights_pick_apps():
    wl = workload([FAN, {**AGENT, "weight": 0.001}])
    starts = {p.calls[0].tokens[:7] for p in wl.programs if p.kind == "fan"}
    assert len(starts) == 1  # every user of the app sends the same system prompt
    assert sum(p.kind == "fan" for p in wl.programs) >= 38
    # Deterministic for a seed.
    assert [p.calls for p in workload([FAN, {**AGENT, "weight": 0.001}]).programs] == [p.calls for p in wl.programs]


@pytest.mark.parametrize("apps, message", [
    ([], "non-empty list"),
    ([FAN, FAN], "unique"),
    ([{**FAN, "shape": "tree"}], "shape must be one of"),
    ([{**FAN, "calls": [3, 2]}], "low 3 > high 2"),
    ([{**FAN, "input": [0, 5]}], "input must be an integer > 0"),
    ([{**MR, "calls": [1, 1]}], "map_reduce needs at least 2 calls"),
    ([{**FAN, "colour": "red"}], "unexpected keyword"),
    (["fan"], "must be a mapping"),
])
def test_bad_profiles_are_refused_naming_the_problem(apps, message):
    with pytest.raises(WorkloadError, match=message):
        workload(apps)


@pytest.mark.parametrize("scenario", ["fairserve_abuse", "justitia_mix", "justitia_starvation"])
def test_paper_scenarios_load(scenario):
    wl = make_workload("apps", scenario)
    assert wl.programs and all(p.kind for p in wl.programs)
