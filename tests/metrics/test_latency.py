import pytest

from sglang_fair.metrics.latency import distribution, percentile, program_latencies, ttfts
from tests.metrics.helpers import rec


def test_percentiles_linear_interpolation():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    assert percentile([7], 99) == 7
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1], 101)
    d = distribution([1.0, 3.0])
    assert d["count"] == 2 and d["mean"] == 2.0 and d["max"] == 3.0


def test_program_latency_first_sent_to_last_done_and_failures():
    records = [rec("a", 1, 2, 3, program="p", call=0), rec("a", 3, 4, 9, program="p", call=1),
               rec("a", 0, 1, 2, program="q", call=0), rec("a", 2, None, None, program="q", call=1, error="boom")]
    done, failed = program_latencies(records)
    assert done == {"p": 8} and failed == ["q"]
    assert ttfts(records) == [1, 1, 1]
