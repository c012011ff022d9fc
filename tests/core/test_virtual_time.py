"""The GPS virtual clock of Justitia (F = V(a) + C/w, V advanced by service / active weight)."""

from __future__ import annotations

import random

import pytest

from sglang_fair.core.virtual_time import VirtualClock


def test_two_jobs_share_then_one_runs_alone():
    clock = VirtualClock()
    assert clock.arrive(100.0) == 100.0
    assert clock.arrive(300.0) == 300.0
    clock.advance(100.0)  # two active: V += 50
    assert clock.now == pytest.approx(50.0) and clock.active == 2
    clock.advance(100.0)  # reaches 100 (job 1 leaves), nothing left over
    assert clock.now == pytest.approx(100.0) and clock.active == 1
    clock.advance(50.0)  # one active: V += 50
    assert clock.now == pytest.approx(150.0)
    assert clock.arrive(10.0) == pytest.approx(160.0)


def test_weights_scale_finish_and_rate():
    clock = VirtualClock()
    assert clock.arrive(100.0, weight=2.0) == 50.0
    clock.arrive(100.0, weight=1.0)
    clock.advance(30.0)  # total weight 3
    assert clock.now == pytest.approx(10.0)


@pytest.mark.parametrize("seed", range(10))
def test_matches_a_direct_fluid_simulation(seed):
    """Equal-weight jobs: GPS serves each active job service/N; a job leaves
    the reference when its received service reaches its cost, at V = F."""
    rng = random.Random(seed)
    clock = VirtualClock()
    left: dict[int, float] = {}
    finish: dict[int, float] = {}
    for step in range(200):
        if rng.random() < 0.3:
            cost = rng.uniform(1, 500)
            finish[step] = clock.arrive(cost)
            left[step] = cost
        delivered = rng.uniform(0, 100)
        clock.advance(delivered)
        # The same service, split by hand.
        while delivered > 1e-9 and left:
            share = delivered / len(left)
            smallest = min(left.values())
            if smallest <= share:
                delivered -= smallest * len(left)
                for j in list(left):
                    left[j] -= smallest
                    if left[j] <= 1e-9:
                        del left[j]
            else:
                for j in left:
                    left[j] -= share
                delivered = 0
        assert clock.active == len(left)
        for j, rest in left.items():  # remaining virtual time of each job is its remaining service
            assert finish[j] - clock.now == pytest.approx(rest, abs=1e-6)


def test_bad_inputs():
    clock = VirtualClock()
    with pytest.raises(ValueError, match="cost"):
        clock.arrive(float("nan"))
    with pytest.raises(ValueError, match="weight"):
        clock.arrive(1.0, weight=0)
