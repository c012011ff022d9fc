"""Per-client Prometheus metrics, exported when SGLang's metrics are on (``--enable-metrics``).

Gauges, labelled ``client`` and ``dp_rank`` (one scheduler per rank), refreshed
at most once a second from the FairScheduler:

* ``sglang_fair:client_input_tokens`` / ``client_cached_tokens`` /
  ``client_output_tokens``: tokens served since the client was first seen;
* ``sglang_fair:client_service``: cost-weighted service received;
* ``sglang_fair:client_counter``: the policy's state (VTC counter, DLPM
  deficit; absent for policies without one);
* ``sglang_fair:client_queued_requests`` / ``client_running_requests``;
* ``sglang_fair:client_preempted_requests``: running requests whose slot
  latency isolation took (``--fair-isolation``);
* ``sglang_fair:client_recomputed_tokens``: tokens prefilled again after a
  retraction or preemption (waste, not service).

Memory stays bounded whatever the number of distinct clients. SGLang serves
``/metrics`` from prometheus_client's multiprocess files, where a removed
label is never deleted, so these series do not use ``Gauge`` objects: each
refresh rewrites one file of this rank's own (``gauge_mostrecent_sglangfair-
dpN.db`` in ``PROMETHEUS_MULTIPROC_DIR``) with the clients the scheduler
knows now, and swaps it in atomically. A client dropped as idle
(``--fair-idle-timeout``) leaves ``/metrics`` at the next refresh; if it
returns, its cumulative values start again from 0. At most ``max_clients``
clients (``SGLANG_FAIR_METRICS_MAX_CLIENTS``, default 1,000 per rank) get
series of their own, those with requests in the scheduler first, then by
service; the others are summed under ``client="~other"`` (no counter), a
label no client id can take.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable

_GAUGES = {
    "client_input_tokens": "Prompt tokens of admitted requests",
    "client_cached_tokens": "Prompt tokens served from the prefix cache",
    "client_output_tokens": "Generated tokens",
    "client_service": "Cost-weighted service received",
    "client_counter": "Policy counter: VTC virtual counter or DLPM deficit",
    "client_queued_requests": "Requests waiting in the scheduler queue",
    "client_running_requests": "Requests in the running batch",
    "client_preempted_requests": "Running requests preempted by latency isolation",
    "client_recomputed_tokens": "Tokens prefilled again after a retraction or preemption",
}
MAX_CLIENTS_ENV = "SGLANG_FAIR_METRICS_MAX_CLIENTS"
DEFAULT_MAX_CLIENTS = 1000
OVERFLOW_CLIENT = "~other"  # normalized ids are [A-Za-z0-9._@-] or "~" + 16 hex digits


class SeriesFile:
    """One multiprocess gauge file (``mostrecent``) rewritten whole on each ``write``.

    Series absent from a write are gone from ``/metrics``, and the file holds
    only what was written last, unlike prometheus_client's own gauges.
    """

    def __init__(self, directory: str | None, tag: str) -> None:
        directory = directory or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not directory:
            raise ValueError("sglang-fair metrics need PROMETHEUS_MULTIPROC_DIR (SGLang sets it with --enable-metrics)")
        self.path = os.path.join(directory, f"gauge_mostrecent_{tag}.db")

    def write(self, samples: Iterable[tuple[str, dict[str, str], str, float]]) -> None:
        """Replace the file's series with ``samples``: (metric name, labels, help, value)."""
        from prometheus_client.mmap_dict import MmapedDict, mmap_key

        tmp = f"{self.path[:-3]}.{os.getpid()}.tmp"  # not *.db: the collector never reads it half-written
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        now = time.time()
        out = MmapedDict(tmp)
        try:
            for metric, labels, help_text, value in samples:
                out.write_value(mmap_key(metric, metric, list(labels), list(labels.values()), help_text),
                                float(value), now)
        finally:
            out.close()
        os.replace(tmp, self.path)


class ClientMetrics:
    def __init__(self, dp_rank: int | None, directory: str | None = None, max_clients: int | None = None) -> None:
        self.dp_rank = str(dp_rank if dp_rank is not None else 0)
        self.file = SeriesFile(directory, f"sglangfair-dp{self.dp_rank}")
        self.max_clients = max_clients if max_clients is not None else max_metrics_clients()
        self._next_update = 0.0

    def maybe_update(self, fair_policy) -> None:
        now = time.monotonic()
        if now < self._next_update:
            return
        self._next_update = now + 1.0
        self.write(client_values(fair_policy.fair))

    def write(self, values: dict[str, dict[str, float]]) -> None:
        """Replace this rank's series with ``values`` (client -> gauge name -> value), capped."""
        self.file.write(
            (f"sglang_fair:{name}", {"client": client, "dp_rank": self.dp_rank}, _GAUGES[name], value)
            for client, gauges in cap_clients(values, self.max_clients).items() for name, value in gauges.items())


def client_values(fair) -> dict[str, dict[str, float]]:
    """Every known client's gauge values, from a core ``FairScheduler``."""
    values = {}
    for client, activity in fair.activity.items():
        row = {"client_queued_requests": activity.queued, "client_running_requests": activity.running}
        served = fair.ledger.get(client)
        if served is not None:
            row.update(client_input_tokens=served.input_tokens, client_cached_tokens=served.cached_tokens,
                       client_output_tokens=served.output_tokens, client_service=served.service,
                       client_preempted_requests=served.preempted,
                       client_recomputed_tokens=served.recomputed_tokens)
        counter = fair.policy.counter(client)
        if counter is not None:
            row["client_counter"] = counter
        values[client] = row
    return values


def cap_clients(values: dict[str, dict[str, float]], max_clients: int) -> dict[str, dict[str, float]]:
    """At most ``max_clients`` clients keep their own rows; the rest are summed under ``OVERFLOW_CLIENT``."""
    if len(values) <= max_clients:
        return values

    def rank(client: str) -> tuple:
        row = values[client]
        active = row.get("client_queued_requests", 0) + row.get("client_running_requests", 0) > 0
        return (not active, -row.get("client_service", 0.0), client)

    ordered = sorted(values, key=rank)
    kept = {client: values[client] for client in ordered[:max_clients]}
    other: dict[str, float] = {}
    for client in ordered[max_clients:]:
        for name, value in values[client].items():
            if name != "client_counter":  # a policy's counter has no meaningful sum
                other[name] = other.get(name, 0.0) + value
    kept[OVERFLOW_CLIENT] = other
    return kept


def max_metrics_clients() -> int:
    """``SGLANG_FAIR_METRICS_MAX_CLIENTS``, checked."""
    raw = os.environ.get(MAX_CLIENTS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_CLIENTS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{MAX_CLIENTS_ENV} must be a positive integer, got {raw!r}")
    return value
