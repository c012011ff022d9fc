import numpy as np
import pytest

from sglang_fair.metrics.service import ServiceWeights, cumulative_service, outstanding, windowed_rates
from tests.metrics.helpers import rec


def test_weights_and_extend_mode():
    r = rec("a", 0, 1, 3, prompt=100, out=10, cached=60)
    assert ServiceWeights().service(r) == 100 + 20
    assert ServiceWeights(input_mode="extend").service(r) == 40 + 20
    assert ServiceWeights().service(rec("a", 0, None, None, error="x")) == 0
    with pytest.raises(ValueError):
        ServiceWeights(w_input=-1)


def test_service_placed_in_time_and_windows():
    w = ServiceWeights(1, 2)
    # input 10 at t=1, output 5 tokens (10 service) spread evenly over [1, 6]
    records = [rec("a", 0, 1, 6, prompt=10, out=5)]
    grid = np.array([0, 1, 2, 6, 7], dtype=float)
    cum = cumulative_service(records, grid, w)
    assert cum.tolist() == pytest.approx([0, 10, 12, 20, 20])
    assert windowed_rates(cum, grid).tolist() == pytest.approx([10, 2, 2, 0])
    # a failed request contributes nothing
    assert cumulative_service([rec("a", 0, None, None, error="boom")], grid, w).tolist() == [0] * 5


def test_outstanding_counts_backlog():
    records = [rec("a", 0, 1, 4), rec("a", 2, 3, 6), rec("a", 1, None, None, error="x")]
    grid = np.array([0, 1, 2, 4, 6], dtype=float)
    assert outstanding(records, grid).tolist() == [1, 1, 2, 1, 0]
