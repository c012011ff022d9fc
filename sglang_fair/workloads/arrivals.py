"""Arrival processes: when each program (or request) of a client starts.

Rates are per second. ``uniform`` spaces arrivals evenly; ``poisson`` draws
exponential gaps (CV 1); ``gamma`` draws Gamma gaps with the given
coefficient of variation (CV > 1 is burstier than Poisson), the process the
DLPM paper uses for its synthetic traces. A schedule is a list of phases
(duration, start rate, end rate): a constant-rate phase, an OFF phase
(rate 0) or a linear ramp. Gaps are drawn in "unit time" of a rate-1 process
and mapped through the cumulative rate, so a ramp bends the same process.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

PROCESSES = ("uniform", "poisson", "gamma")


@dataclass(frozen=True)
class Phase:
    duration: float  # seconds
    rate: float  # requests per second at the phase start
    end_rate: float | None = None  # rate at the phase end (linear ramp); None = constant

    def rate_at_end(self) -> float:
        return self.rate if self.end_rate is None else self.end_rate


def check_process(process: str, cv: float) -> None:
    if process not in PROCESSES:
        raise ValueError(f"unknown arrival process {process!r}: expected one of {', '.join(PROCESSES)}")
    if not (cv > 0 and math.isfinite(cv)):
        raise ValueError(f"arrival cv must be a positive number, got {cv}")


def check_phases(phases: list[Phase]) -> None:
    if not phases:
        raise ValueError("an arrival schedule needs at least one phase")
    for k, ph in enumerate(phases):
        if not (ph.duration > 0 and math.isfinite(ph.duration)):
            raise ValueError(f"phase {k}: duration must be a positive number, got {ph.duration}")
        for r in (ph.rate, ph.rate_at_end()):
            if not (r >= 0 and math.isfinite(r)):
                raise ValueError(f"phase {k}: rates must be >= 0, got {r}")


def unit_gaps(rng: random.Random, process: str, cv: float):
    """Endless gaps of a rate-1 process (mean 1)."""
    check_process(process, cv)
    while True:
        if process == "uniform":
            yield 1.0
        elif process == "poisson":
            yield rng.expovariate(1.0)
        else:
            shape = 1.0 / (cv * cv)
            yield rng.gammavariate(shape, 1.0 / shape)


def arrival_times(
    rng: random.Random,
    phases: list[Phase],
    process: str = "poisson",
    cv: float = 1.0,
    limit: int | None = None,
) -> list[float]:
    """Arrival times over the whole schedule (at most ``limit`` of them)."""
    check_phases(phases)
    gaps = unit_gaps(rng, process, cv)
    times: list[float] = []
    # A uniform process starts half a gap in, so a rate r phase holds r*d arrivals.
    need = next(gaps) * (0.5 if process == "uniform" else 1.0)
    start = 0.0
    for ph in phases:
        r0, r1 = ph.rate, ph.rate_at_end()
        mass = 0.5 * (r0 + r1) * ph.duration  # expected arrivals in the phase
        while need <= mass:
            times.append(start + _invert(need, r0, r1, ph.duration))
            if limit is not None and len(times) >= limit:
                return times
            need += next(gaps)
        need -= mass
        start += ph.duration
    return times


def _invert(m: float, r0: float, r1: float, d: float) -> float:
    """Time t in [0, d] where the integral of the linear rate reaches m."""
    slope = (r1 - r0) / d
    if abs(slope) < 1e-12:
        return m / r0
    # slope/2 t^2 + r0 t - m = 0
    disc = r0 * r0 + 2 * slope * m
    return (-r0 + math.sqrt(max(disc, 0.0))) / slope


def fixed_count_times(rng: random.Random, count: int, rate: float, process: str = "poisson", cv: float = 1.0) -> list[float]:
    """``count`` arrivals of a constant-rate process (for program-count workloads)."""
    if count < 0:
        raise ValueError(f"number of programs must be >= 0, got {count}")
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive number, got {rate}")
    gaps = unit_gaps(rng, process, cv)
    t = 0.0  # the first program starts the run
    times = []
    for _ in range(count):
        times.append(t)
        t += next(gaps) / rate
    return times
