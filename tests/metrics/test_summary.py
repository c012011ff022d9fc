import json

import pytest

from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.metrics.summary import SCHEMA_VERSION, cache_hit_rate, summarize, timeline
from tests.metrics.helpers import rec


def records():
    return [
        rec("good", 0, 1, 4, prompt=10, out=4, cached=0, program="g1"),
        rec("good", 4, 5, 8, prompt=20, out=4, cached=10, program="g1", call=1),
        rec("bad", 0, 2, 6, prompt=40, out=4, cached=20, program="b1", wb=False),
        rec("bad", 1, None, None, program="b2", wb=False, error="server error: HTTP 500"),
    ]


def test_summary_schema_and_values():
    s = summarize(records(), window_s=1.0, run={"policy": "fcfs"})
    json.dumps(s)  # serializable
    assert s["schema_version"] == SCHEMA_VERSION and s["run"] == {"policy": "fcfs"}
    o = s["overall"]
    assert (o["requests"], o["requests_ok"], o["requests_failed"]) == (4, 3, 1)
    assert (o["programs"], o["programs_ok"], o["programs_failed"]) == (3, 2, 1)
    assert o["duration_s"] == 8
    assert o["service"] == (10 + 8) + (20 + 8) + (40 + 8)
    assert o["throughput"]["service_per_s"] == pytest.approx(94 / 8)
    # only the well-behaved client's program counts: g1 took 8 s
    assert o["well_behaved_program_latency_s"]["p50"] == 8
    assert o["program_latency_s"]["count"] == 2
    assert o["cache_hit_rate"] == pytest.approx(30 / 70)
    assert o["jain_index"] is not None and o["jain_interval_s"] == [0, 6]
    assert s["clients"]["bad"]["well_behaved"] is False and s["clients"]["good"]["well_behaved"] is True
    assert s["clients"]["bad"]["requests_failed"] == 1


def test_throttled_requests_and_wasted_tokens():
    rs = records() + [
        # an interaction refused at its second call: its first call's tokens were wasted
        rec("bad", 2, 3, 4, prompt=30, out=6, program="b3", wb=False),
        rec("bad", 4, None, None, program="b3", call=1, wb=False, error="throttled: HTTP 429"),
        rec("good", 5, None, None, program="g2", error="throttled: HTTP 429"),
    ]
    rs[-2].throttled = rs[-1].throttled = True
    s = summarize(rs, window_s=1.0)
    o = s["overall"]
    assert (o["requests_failed"], o["requests_throttled"]) == (3, 2)
    assert o["wasted_tokens"] == 30 + 6  # b2 and g2 failed with nothing served; g1 and b1 completed
    assert s["clients"]["bad"]["requests_throttled"] == 1 and s["clients"]["good"]["requests_throttled"] == 1
    assert s["clients"]["bad"]["wasted_tokens"] == 36 and s["clients"]["good"]["wasted_tokens"] == 0


def test_well_behaved_override_and_cache_rate_absent():
    rs = [rec("a", 0, 1, 2), rec("b", 0, 1, 2)]
    s = summarize(rs, well_behaved={"a": False}, weights=ServiceWeights())
    assert s["clients"]["a"]["well_behaved"] is False
    assert cache_hit_rate(rs) is None


def test_timeline_rows_cover_each_window_and_client():
    rows = timeline(records(), ServiceWeights(), 2.0)
    assert {r["client"] for r in rows} == {"good", "bad"}
    assert len(rows) == 2 * 4  # windows [0,2) .. [6,8)
    last = {r["client"]: r["cumulative_service"] for r in rows if r["window_end_s"] == 8}
    assert last == {"good": pytest.approx(46), "bad": pytest.approx(48)}
