import random
import statistics

import pytest

from sglang_fair.workloads.arrivals import Phase, arrival_times, fixed_count_times


def gaps(times):
    return [b - a for a, b in zip(times, times[1:])]


def test_uniform_is_evenly_spaced():
    t = arrival_times(random.Random(0), [Phase(10, 2.0)], "uniform")
    assert len(t) == 20 and all(abs(g - 0.5) < 1e-9 for g in gaps(t))


@pytest.mark.parametrize("process, cv", [("poisson", 1.0), ("gamma", 2.0), ("gamma", 0.5)])
def test_rate_and_cv(process, cv):
    t = fixed_count_times(random.Random(1), 20000, 4.0, process, cv)
    g = gaps(t)
    assert statistics.mean(g) == pytest.approx(0.25, rel=0.05)
    assert statistics.pstdev(g) / statistics.mean(g) == pytest.approx(cv, rel=0.08)


def test_ramp_puts_more_arrivals_late():
    t = arrival_times(random.Random(0), [Phase(100, 0.0, 2.0)], "uniform")
    assert len(t) == 100  # integral of the rate
    assert sum(x > 50 for x in t) == pytest.approx(75, abs=1)


def test_off_phase_has_no_arrivals():
    t = arrival_times(random.Random(0), [Phase(10, 1.0), Phase(10, 0.0), Phase(10, 1.0)], "poisson")
    assert not any(10 <= x < 20 for x in t)


def test_bad_schedule():
    with pytest.raises(ValueError, match="rates must be >= 0"):
        arrival_times(random.Random(0), [Phase(10, -1.0)])
    with pytest.raises(ValueError, match="duration"):
        arrival_times(random.Random(0), [Phase(0, 1.0)])
    with pytest.raises(ValueError, match="rate must be a positive"):
        fixed_count_times(random.Random(0), 3, 0.0)
