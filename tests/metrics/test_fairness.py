import pytest

from sglang_fair.metrics.fairness import (
    all_active_interval,
    jain_all_active,
    jain_index,
    max_backlogged_service_diff,
    max_in_flight_service_diff,
)
from sglang_fair.metrics.service import ServiceWeights
from tests.metrics.helpers import rec


def test_jain_known_values():
    assert jain_index([1, 1, 1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)  # 1/n: one client takes everything
    assert jain_index([1, 2]) == pytest.approx(9 / 10)
    assert jain_index([3, 1, 2]) == pytest.approx(36 / 42)
    assert jain_index([]) is None and jain_index([0, 0]) is None
    with pytest.raises(ValueError):
        jain_index([1, -1])


def test_all_active_interval_and_jain_inside_it():
    w = ServiceWeights(1, 0)
    # a: active 0..10, input 10 at t=1 and t=6; b: active 4..20, one input of 30 at t=5
    records = [rec("a", 0, 1, 2, prompt=10), rec("a", 5, 6, 10, prompt=10),
               rec("b", 4, 5, 20, prompt=30, out=0)]
    assert all_active_interval(records) == (4, 10)
    j, interval = jain_all_active(records, w)
    assert interval == (4, 10)
    # inside [4, 10]: a got 10, b got 30 -> rates 10/6 and 30/6 -> J([1,3]) = 16/20
    assert j == pytest.approx(0.8)


def test_no_common_interval():
    records = [rec("a", 0, 1, 2), rec("b", 3, 4, 5)]
    assert all_active_interval(records) is None
    assert jain_all_active(records, ServiceWeights()) == (None, None)


def test_max_in_flight_service_diff():
    w = ServiceWeights(1, 0)
    # both in flight over [0, 10]; a gets 100 at t=2, b gets 40 at t=8 -> max |diff| = 100
    # (from t1 = 0 to t2 in [2, 8)).
    records = [rec("a", 0, 2, 10, prompt=100, out=0), rec("b", 0, 8, 10, prompt=40, out=0)]
    assert max_in_flight_service_diff(records, w, 0.5) == pytest.approx(100)
    # b has nothing in flight when a is served: b's request is sent only at t=5
    records = [rec("a", 0, 2, 4, prompt=100, out=0), rec("b", 5, 8, 10, prompt=40, out=0)]
    assert max_in_flight_service_diff(records, w, 0.5) == pytest.approx(0)
    assert max_in_flight_service_diff([rec("a", 0, 1, 2)], w, 0.5) is None


def test_max_backlogged_service_diff_needs_admission_times():
    # Records without t_admitted (older runs) cannot tell waiting from running.
    records = [rec("a", 0, 2, 10, prompt=100, out=0), rec("b", 0, 8, 10, prompt=40, out=0)]
    assert max_backlogged_service_diff(records, ServiceWeights(1, 0)) is None
