"""Backlog and delivered service as the fairness theorems define them (docs/metrics.md).

A client is *backlogged* while it has a request waiting for admission: sent
and not yet admitted into a running batch, or retracted back to the queue and
not yet re-admitted. A request that is running is not waiting.

Service is counted when it is delivered: the input part of a request
(``weights.input_service``: its extend, prompt minus cached tokens, with
``input_mode="extend"``) at its first admission, and each output token when
it is produced (the record's ``progress`` points). Service is a step function
of time, so the largest difference between two clients over intervals in
which both are backlogged is found exactly on the event times; events at the
very instant a both-backlogged span starts or ends are not counted in it
(the records cannot order events of one instant).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from sglang_fair.runs.records import RequestRecord
from sglang_fair.metrics.service import ServiceWeights, by_client


class MissingAuditData(ValueError):
    """The records lack what the backlog or delivered service needs."""


@dataclass(frozen=True)
class ServiceGap:
    """The largest |W_f(t1, t2) - W_g(t1, t2)| over both-backlogged intervals."""

    value: float
    clients: tuple[str, str] | None  # the worst pair; None when no two clients were ever backlogged together
    interval: tuple[float, float] | None  # [t1, t2], service at both ends included


def audit_problem(records: list[RequestRecord]) -> str | None:
    """Why these records cannot give backlog and delivered service, or None if they can."""
    ok = [r for r in records if r.ok]
    no_admission = sum(r.t_admitted is None for r in ok)
    if no_admission:
        return (f"{no_admission} of {len(ok)} finished requests have no admission time (t_admitted): "
                "the run was recorded without it (an older run, or a server started without --enable-metrics)")
    no_progress = sum(r.progress is None and r.output_tokens > 0 for r in ok)
    if no_progress:
        return (f"{no_progress} of {len(ok)} finished requests have no output progress: "
                "the run was recorded without it (an older run, or a non-streaming replay)")
    return None


def backlog_spans(records: list[RequestRecord]) -> list[tuple[float, float]]:
    """Maximal intervals [start, end] during which the records' client has a request waiting."""
    spans = []
    for r in records:
        if r.t_admitted is not None:
            spans.append((r.t_sent, r.t_admitted))
        for retracted, readmitted in r.requeues:
            end = readmitted if readmitted is not None else r.t_done
            if end is not None:
                spans.append((retracted, end))
    return merge_spans(s for s in spans if s[1] > s[0])  # a request admitted on arrival never waited


def merge_spans(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``spans`` as maximal disjoint intervals, in time order (touching ones merge)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def service_steps(records: list[RequestRecord], weights: ServiceWeights) -> tuple[np.ndarray, np.ndarray]:
    """(event times, cumulative delivered service right after each) of the given records."""
    events: list[tuple[float, float]] = []
    for r in records:
        if not r.ok:
            continue  # a failed request delivers nothing a client could use, as in the other metrics
        if r.t_admitted is None or (r.progress is None and r.output_tokens > 0):
            raise MissingAuditData(f"request {r.rid}: no admission time or output progress")
        events.append((r.t_admitted, weights.input_service(r)))
        done = 0.0
        for t, cumulative in r.progress or ():
            events.append((t, weights.w_output * (cumulative - done)))
            done = cumulative
    if not events:
        return np.zeros(0), np.zeros(0)
    events.sort()
    times = np.array([t for t, _ in events])
    cum = np.cumsum([s for _, s in events])
    last = np.r_[times[1:] != times[:-1], True]  # the value after every event at the same instant
    return times[last], cum[last]


def _at(steps: tuple[np.ndarray, np.ndarray], t: np.ndarray, left: bool = False) -> np.ndarray:
    """Cumulative service at ``t`` (just before ``t`` with ``left``)."""
    times, cum = steps
    k = np.searchsorted(times, t, side="left" if left else "right")
    return np.where(k > 0, cum[np.maximum(k - 1, 0)] if len(cum) else 0.0, 0.0)


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _pair_gap(f: tuple[np.ndarray, np.ndarray], g: tuple[np.ndarray, np.ndarray],
              spans: list[tuple[float, float]]) -> tuple[float, tuple[float, float] | None]:
    best, where = 0.0, None
    for a, b in spans:
        # Events at a span's ends are left out: events of one instant have no order
        # in the records (an admission at ``b`` may have come after the backlog
        # ended), so only what happened strictly inside it is surely inside.
        inside = [ts[np.searchsorted(ts, a, "right"):np.searchsorted(ts, b, "left")] for ts in (f[0], g[0])]
        points = np.union1d(np.union1d(inside[0], inside[1]), [a])
        # v[k] is D = W_f - W_g right after points[k]: service over (points[i], points[j]]
        # is v[j] - v[i], so the largest |difference| is max(v) - min(v).
        v = _at(f, points) - _at(g, points)
        hi, lo = int(np.argmax(v)), int(np.argmin(v))
        gap = float(v[hi] - v[lo])
        if gap > best:
            best, where = gap, (float(points[min(hi, lo)]), float(points[max(hi, lo)]))
    return best, where


def max_backlogged_gap(records: list[RequestRecord], weights: ServiceWeights) -> ServiceGap | None:
    """max over client pairs f, g and intervals [t1, t2] in which both are backlogged of
    |W_f(t1, t2) - W_g(t1, t2)|, exact. None with fewer than two clients.

    Raises MissingAuditData when the records lack admission times or progress.
    """
    problem = audit_problem(records)
    if problem is not None:
        raise MissingAuditData(problem)
    groups = by_client(records)
    if len(groups) < 2:
        return None
    steps = {c: service_steps(rs, weights) for c, rs in groups.items()}
    spans = {c: backlog_spans(rs) for c, rs in groups.items()}
    names = list(groups)
    worst = ServiceGap(0.0, None, None)
    for i, f in enumerate(names):
        for g in names[i + 1:]:
            gap, where = _pair_gap(steps[f], steps[g], _intersect(spans[f], spans[g]))
            if where is not None and gap > worst.value:
                worst = ServiceGap(gap, (f, g), where)
    return worst
