"""Fairness metrics: Jain's index over the all-active interval, and the largest
service difference between backlogged clients (and between clients with
requests in flight, which needs no server-side times)."""

from __future__ import annotations

import numpy as np

from sglang_fair.runs.records import RequestRecord
from sglang_fair.metrics.backlog import MissingAuditData, max_backlogged_gap
from sglang_fair.metrics.service import ServiceWeights, active_interval, by_client, cumulative_service, outstanding


def jain_index(values: list[float]) -> float | None:
    """(sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one takes all.

    None for no values or all zeros (nobody got service: undefined).
    """
    x = np.asarray(values, dtype=float)
    if np.any(x < 0):
        raise ValueError("Jain's index needs non-negative allocations")
    if x.size == 0:
        return None
    sq = float(np.sum(x * x))
    if sq == 0:
        return None
    return float(np.sum(x) ** 2 / (x.size * sq))


def all_active_interval(records: list[RequestRecord]) -> tuple[float, float] | None:
    """The interval during which every client is active (DLPM paper §6.1):
    from the latest first-send to the earliest last-finish. None if empty."""
    spans = [active_interval(rs) for rs in by_client(records).values()]
    if not spans or any(s is None for s in spans):
        return None
    start = max(s[0] for s in spans)
    end = min(s[1] for s in spans)
    return (start, end) if end > start else None


def service_rates_in(records: list[RequestRecord], interval: tuple[float, float],
                     weights: ServiceWeights) -> dict[str, float]:
    """Each client's service per second inside ``interval``."""
    t0, t1 = interval
    grid = np.array([t0, t1])
    return {c: float(np.diff(cumulative_service(rs, grid, weights))[0] / (t1 - t0))
            for c, rs in by_client(records).items()}


def jain_all_active(records: list[RequestRecord], weights: ServiceWeights) -> tuple[float | None, tuple[float, float] | None]:
    """Jain's index of the clients' service rates over the all-active interval."""
    interval = all_active_interval(records)
    if interval is None:
        return None, None
    return jain_index(list(service_rates_in(records, interval, weights).values())), interval


def max_backlogged_service_diff(records: list[RequestRecord], weights: ServiceWeights) -> float | None:
    """The quantity the fairness theorems bound: max over client pairs and intervals
    in which both have a request waiting for admission of |W_f - W_g|, with service
    counted as delivered (sglang_fair/metrics/backlog.py), exact. None with fewer
    than two clients or when the records lack admission times or output progress."""
    try:
        gap = max_backlogged_gap(records, weights)
    except MissingAuditData:
        return None
    return None if gap is None else gap.value


def max_in_flight_service_diff(records: list[RequestRecord], weights: ServiceWeights, step_s: float) -> float | None:
    """max over client pairs f, g and intervals [t1, t2] during which both have a
    request in flight (sent, not finished) of |W_f(t1, t2) - W_g(t1, t2)|, with
    service placed as the client sees it (``cumulative_service``), on a grid of
    ``step_s``. Needs no server-side times; it is not the quantity the papers
    bound (running requests count as backlog). None with fewer than two clients."""
    groups = by_client(records)
    if len(groups) < 2:
        return None
    end = max([r.t_done for r in records if r.t_done is not None] + [r.t_sent for r in records])
    times = np.arange(0.0, end + step_s, step_s)
    cum = {c: cumulative_service(rs, times, weights) for c, rs in groups.items()}
    busy = {c: outstanding(rs, times) > 0 for c, rs in groups.items()}
    names = list(groups)
    best = 0.0
    for i, f in enumerate(names):
        for g in names[i + 1:]:
            both = busy[f] & busy[g]
            diff = cum[f] - cum[g]
            # Split into maximal runs where both are backlogged; within a run the
            # largest |D(t2) - D(t1)| is max(D) - min(D).
            k = 0
            while k < len(times):
                if not both[k]:
                    k += 1
                    continue
                j = k
                while j + 1 < len(times) and both[j + 1]:
                    j += 1
                seg = diff[k:j + 2] if j + 1 < len(times) else diff[k:j + 1]  # include the run's end edge
                best = max(best, float(seg.max() - seg.min()))
                k = j + 1
    return best
