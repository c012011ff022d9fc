"""The simulator records what an auditor needs: admission, output progress, retractions."""

from sglang_fair.sim.backend import SimBackend
from tests.sim.test_backend import tree_workload


def test_admission_and_progress_are_recorded():
    result = SimBackend(policy="dlpm", num_workers=2).run(tree_workload(), progress=False)
    for r in result.records:
        assert r.t_sent <= r.t_admitted <= r.t_first_token <= r.t_done
        times = [t for t, _ in r.progress]
        tokens = [n for _, n in r.progress]
        assert times == sorted(times) and tokens == sorted(set(tokens))  # one point per step or segment
        assert r.progress[0] == [r.t_first_token, 1] and r.progress[-1] == [r.t_done, r.output_tokens]
        assert r.requeues == [] and r.retractions == 0


def test_retractions_are_recorded_with_their_readmission():
    wl = tree_workload(programs=8, out=200)
    result = SimBackend(policy="vtc", num_workers=1, kv_pool_tokens=3000).run(wl, progress=False)
    assert not result.partial
    requeues = [q for r in result.records for q in r.requeues]
    assert len(requeues) == result.meta["workers"][0]["retractions"] > 0
    for r in result.records:
        assert r.retractions == len(r.requeues)
        for retracted, readmitted in r.requeues:
            assert r.t_admitted < retracted <= readmitted < r.t_done
