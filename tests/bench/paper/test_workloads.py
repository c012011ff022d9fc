"""The figures' workloads: scaled VTC scenarios, merged and shifted parts, Fig. 8's flood that
stops half-way, and the response-time and service helpers."""

from sglang_fair.bench.paper.common import end_to_end, merge, percentile, response_times, service_in
from sglang_fair.bench.paper.dlpm_traces import chat_flood
from sglang_fair.bench.paper.vtc import FIG3, scaled
from sglang_fair.runs.records import RequestRecord
from sglang_fair.workloads.model import Call, Program, Workload


def test_scaled_multiplies_rates_and_durations_without_touching_the_original():
    raw = {"workload": "synthetic", "name": "x", "defaults": {"rate": 1.0, "duration": 300},
           "clients": [{"name": "a", "rate": 0.5, "end_rate": 2.0, "on_off": [60, 60]},
                       {"name": "b", "phases": [{"duration": 60, "rate": 0.5}, {"duration": 30, "rate": 1.0,
                                                                                 "end_rate": 0.0}]}]}
    out = scaled(raw, 6.0, 0.1)
    assert out["defaults"] == {"rate": 6.0, "duration": 30.0}
    assert out["clients"][0] == {"name": "a", "rate": 3.0, "end_rate": 12.0, "on_off": [6.0, 6.0]}
    assert out["clients"][1]["phases"] == [{"duration": 6.0, "rate": 3.0}, {"duration": 3.0, "rate": 6.0, "end_rate": 0.0}]
    assert raw["clients"][0]["rate"] == 0.5 and FIG3["clients"][0]["rate"] == 1.5


def test_merge_shifts_parts_and_keeps_ids_unique():
    call = (Call(tokens=(1, 2), max_new_tokens=1),)
    a = Workload("a", [Program("c/r0", "c", 1.0, call)])
    b = Workload("b", [Program("c/r0", "c", 0.5, call)])
    wl = merge("ab", a, b, shifts=(0.0, 10.0))
    assert [(p.program_id, p.arrival) for p in wl.programs] == [("c/r0.0", 1.0), ("c/r0.1", 10.5)]


def test_fig8_flooder_c2_returns_to_normal_half_way():
    wl, t = chat_flood(quick=True, seed=0)
    first = {c: sum(p.client == c and p.arrival < t / 2 for p in wl.programs) for c in ("c0", "c2", "c3")}
    second = {c: sum(p.client == c and p.arrival >= t / 2 for p in wl.programs) for c in ("c0", "c2", "c3")}
    assert first["c2"] > 10 * second["c2"]  # flooding, then the normal rate
    assert second["c3"] > 10 * second["c0"]  # c3 floods throughout
    assert not any(p.well_behaved for p in wl.programs if p.client in ("c2", "c3"))
    assert all(p.well_behaved for p in wl.programs if p.client in ("c0", "c1"))


def _rec(client: str, sent: float, done: float | None, prompt: int = 10, out: int = 5) -> RequestRecord:
    return RequestRecord(rid=f"{client}{sent}", client=client, program_id="p", call_index=0, well_behaved=True,
                         t_sent=sent, t_first_token=None, t_done=done, prompt_tokens=prompt, cached_tokens=0,
                         output_tokens=out, error=None if done is not None else "failed")


def test_response_and_service_helpers():
    recs = [_rec("a", 0.0, 1.0), _rec("a", 1.0, 4.0), _rec("b", 0.0, 2.0), _rec("b", 0.0, None)]
    assert response_times(recs, ["a"]) == [1.0, 3.0]
    assert sorted(response_times(recs)) == [1.0, 2.0, 3.0]
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0 and percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    assert percentile([], 99) is None
    assert end_to_end(recs) == 4.0
    assert service_in(recs, 0.0, 2.5) == {"a": 20 / 2.5, "b": 20 / 2.5}  # 10 + 2 x 5 each
