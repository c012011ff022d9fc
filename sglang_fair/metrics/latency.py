"""Latency metrics: program end-to-end latency and time to first token.

A program's latency runs from its first call sent to its last call finished;
a program with any failed call has no latency (it is counted as failed).
Percentiles use linear interpolation between order statistics (numpy's
default), so P50 of [1, 2, 3, 4] is 2.5.
"""

from __future__ import annotations

import numpy as np

from sglang_fair.runs.records import RequestRecord


def percentile(values: list[float], q: float) -> float | None:
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def distribution(values: list[float]) -> dict:
    """count, mean, p50, p90, p99, max (None when there are no values)."""
    return {
        "count": len(values),
        "mean": float(np.mean(values)) if values else None,
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": float(max(values)) if values else None,
    }


def program_latencies(records: list[RequestRecord]) -> tuple[dict[str, float], list[str]]:
    """(latency per finished program, ids of programs with a failed call)."""
    calls: dict[str, list[RequestRecord]] = {}
    for r in records:
        calls.setdefault(r.program_id, []).append(r)
    done: dict[str, float] = {}
    failed: list[str] = []
    for pid, rs in calls.items():
        if all(r.ok and r.t_done is not None for r in rs):
            done[pid] = max(r.t_done for r in rs) - min(r.t_sent for r in rs)
        else:
            failed.append(pid)
    return done, sorted(failed)


def ttfts(records: list[RequestRecord]) -> list[float]:
    return [r.t_first_token - r.t_sent for r in records if r.ok and r.t_first_token is not None]


def request_latencies(records: list[RequestRecord]) -> list[float]:
    return [r.t_done - r.t_sent for r in records if r.ok and r.t_done is not None]
