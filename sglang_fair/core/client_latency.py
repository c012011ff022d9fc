"""Per-client latency histograms, as the scheduler sees each request.

Three per client, all from the request's arrival in the scheduler's queue
(``TrackedRequest.arrival``): time waiting for its first admission, time to
its first output token, and time to its end. Histograms, not samples, so
memory per client is fixed whatever the traffic; a client forgotten as idle
takes its histograms with it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Upper bounds in seconds (the last bucket, +Inf, is implicit): from
# interactive (10 ms) to long batch work (5 min), like SGLang's own buckets.
LATENCY_BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0,
                                        120.0, 300.0)


@dataclass(slots=True)
class LatencyHistogram:
    """Observations per bucket of ``LATENCY_BUCKETS_S`` (not cumulative; the last is +Inf) and their sum."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    total_s: float = 0.0

    def observe(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
        self.total_s += seconds

    def merge(self, other: LatencyHistogram) -> None:
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.total_s += other.total_s

    @property
    def count(self) -> int:
        return sum(self.counts)


@dataclass(slots=True)
class ClientLatency:
    queue_time: LatencyHistogram = field(default_factory=LatencyHistogram)  # arrival -> first admission
    first_token: LatencyHistogram = field(default_factory=LatencyHistogram)  # arrival -> first output token
    end_to_end: LatencyHistogram = field(default_factory=LatencyHistogram)  # arrival -> finished (after running)


class LatencyRecord:
    def __init__(self) -> None:
        self._clients: dict[str, ClientLatency] = {}

    def _get(self, client: str) -> ClientLatency:
        entry = self._clients.get(client)
        if entry is None:
            entry = self._clients[client] = ClientLatency()
        return entry

    def admitted(self, client: str, waited_s: float) -> None:
        self._get(client).queue_time.observe(waited_s)

    def first_token(self, client: str, after_s: float) -> None:
        self._get(client).first_token.observe(after_s)

    def finished(self, client: str, after_s: float) -> None:
        self._get(client).end_to_end.observe(after_s)

    def get(self, client: str) -> ClientLatency | None:
        return self._clients.get(client)

    def forget(self, client: str) -> None:
        self._clients.pop(client, None)
