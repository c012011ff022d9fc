"""Per-client Prometheus metrics, exported when SGLang's metrics are on (``--enable-metrics``).

Labelled ``client`` and ``dp_rank`` (one scheduler per rank), refreshed at
most once a second from the FairScheduler. Counters (cumulative since the
client was first seen, or last forgotten as idle):

* ``sglang_fair_client_input_tokens_total`` / ``client_cached_tokens_total`` /
  ``client_output_tokens_total``: tokens served;
* ``sglang_fair_client_service_total``: cost-weighted service received;
* ``sglang_fair_client_preempted_requests_total``: running requests whose
  slot latency isolation took (``--fair-isolation``);
* ``sglang_fair_client_recomputed_tokens_total``: tokens prefilled again after
  a retraction or preemption (waste, not service).

Gauges: ``sglang_fair_client_policy_state`` (the policy's state: VTC counter, DLPM
deficit; absent for policies without one), ``client_queued_requests``,
``client_running_requests``, ``client_weight`` (in force: set at start or at
run time, http/admin_routes.py); and, per rank only, ``sglang_fair_quantum``.
Histograms (seconds, from the request's arrival in the scheduler's queue;
under ``--dp`` time held in the router is not included):
``sglang_fair_client_queue_time_seconds`` (to first admission),
``client_time_to_first_token_seconds``, ``client_e2e_request_latency_seconds``.

Names use ``_`` where SGLang uses ``:``: prometheus_client 0.26 (SGLang
0.5.23's) writes sample names with colons as underscores in the OpenMetrics
format Prometheus asks for, so ``:`` names would not reach Prometheus as
written (docs/configuration.md).

Memory stays bounded whatever the number of distinct clients. SGLang serves
``/metrics`` from prometheus_client's multiprocess files, where a removed
label is never deleted, so these series do not use prometheus_client's
metric objects: each refresh rewrites this rank's own files (``counter_``,
``gauge_mostrecent_`` and ``histogram_sglangfair-dpN.db`` in
``PROMETHEUS_MULTIPROC_DIR``) with the clients the scheduler knows now, and
swaps them in atomically. A client dropped as idle (``--fair-idle-timeout``)
leaves ``/metrics`` at the next refresh; if it returns, its counters start
again from 0 (a counter reset to Prometheus). At most ``max_clients``
clients (``SGLANG_FAIR_METRICS_MAX_CLIENTS``, default 1,000 per rank) get
series of their own, those with requests in the scheduler first, then by
service; the others are summed under ``client="~other"`` (no policy
counter), a label no client id can take.

Which rank exports is decided once, at its first refresh
(``ClientMetricsExport``): the first tensor-parallel rank of each worker,
when SGLang's metrics are on and share a Prometheus directory with the HTTP
server (Ray actors get none).
"""

from __future__ import annotations

import functools
import os
import time

from sglang_fair.binding.common.metrics_files import FILE_KINDS, SeriesFile
from sglang_fair.binding.common.settings import max_metrics_clients
from sglang_fair.core.client_latency import LATENCY_BUCKETS_S, LatencyHistogram

# name -> (kind, help); kinds are Prometheus types, as SGLang names them.
SERIES: dict[str, tuple[str, str]] = {
    "client_input_tokens": ("counter", "Prompt tokens of admitted requests"),
    "client_cached_tokens": ("counter", "Prompt tokens served from the prefix cache"),
    "client_output_tokens": ("counter", "Generated tokens"),
    "client_service": ("counter", "Cost-weighted service received"),
    "client_preempted_requests": ("counter", "Running requests preempted by latency isolation"),
    "client_recomputed_tokens": ("counter", "Tokens prefilled again after a retraction or preemption"),
    "client_policy_state": ("gauge", "Policy counter: VTC virtual counter or DLPM deficit"),
    "client_queued_requests": ("gauge", "Requests waiting in the scheduler queue"),
    "client_running_requests": ("gauge", "Requests in the running batch"),
    "client_weight": ("gauge", "Client weight in force (1 = default); set at start or at run time"),
    "client_queue_time_seconds": ("histogram", "Seconds from arrival in the scheduler queue to first admission"),
    "client_time_to_first_token_seconds": ("histogram", "Seconds from arrival in the scheduler queue to the first output token"),
    "client_e2e_request_latency_seconds": ("histogram", "Seconds from arrival in the scheduler queue to the end of a request that ran"),
}
_BUCKET_LABELS = [repr(bound) for bound in LATENCY_BUCKETS_S] + ["+Inf"]
OVERFLOW_CLIENT = "~other"  # normalized ids are [A-Za-z0-9._@-] or "~" + 16 hex digits

Value = float | LatencyHistogram


class ClientMetricsExport:
    """A rank's per-client series: refreshed through its exporter, if it has one.

    Decided at the first refresh, not at construction: SGLang's runtime context
    (metrics on, the rank's place) is published by then.
    """

    @functools.cached_property
    def exporter(self) -> ClientMetrics | None:
        from sglang.srt.runtime_context import get_observability, get_parallel

        parallel = get_parallel()
        # Ray actors get no Prometheus directory shared with the HTTP server: nothing to export to.
        # Tensor-parallel ranks hold the same state: the first one exports it for its worker.
        if (get_observability().enable_metrics and os.environ.get("PROMETHEUS_MULTIPROC_DIR")
                and getattr(parallel, "tp_rank", 0) == 0):
            return ClientMetrics(parallel.dp_rank)
        return None

    def refresh(self, fair_policy) -> None:
        """Rewrite the series from ``fair_policy`` (at most once a second), where this rank exports."""
        exporter = self.exporter
        if exporter is not None:
            exporter.maybe_update(fair_policy)


class ClientMetrics:
    def __init__(self, dp_rank: int | None, directory: str | None = None, max_clients: int | None = None) -> None:
        self.dp_rank = str(dp_rank if dp_rank is not None else 0)
        tag = f"sglangfair-dp{self.dp_rank}"
        self.files = {kind: SeriesFile(directory, tag, kind) for kind in FILE_KINDS}
        self.max_clients = max_clients if max_clients is not None else max_metrics_clients()
        self._next_update = 0.0

    def maybe_update(self, fair_policy) -> None:
        now = time.monotonic()
        if now < self._next_update:
            return
        self._next_update = now + 1.0
        self.write(client_values(fair_policy.fair), fair_policy.fair.options.quantum)

    def write(self, values: dict[str, dict[str, Value]], quantum: float | None = None) -> None:
        """Replace this rank's series with ``values`` (client -> series name -> value, capped)
        and ``quantum`` (the policy's Q^u in force)."""
        by_kind: dict[str, list[tuple[str, str, dict[str, str], str, float]]] = {kind: [] for kind in FILE_KINDS}
        if quantum is not None:
            by_kind["gauge"].append(("sglang_fair_quantum", "sglang_fair_quantum", {"dp_rank": self.dp_rank},
                                     "Quantum Q^u in force (DLPM refill); set at start or at run time", quantum))
        for client, row in cap_clients(values, self.max_clients).items():
            labels = {"client": client, "dp_rank": self.dp_rank}
            for name, value in row.items():
                kind, help_text = SERIES[name]
                metric = f"sglang_fair_{name}"
                out = by_kind[kind]
                if kind == "gauge":
                    out.append((metric, metric, labels, help_text, value))
                elif kind == "counter":
                    out.append((metric, f"{metric}_total", labels, help_text, value))
                else:  # per-bucket counts; the collector makes them cumulative and adds _count
                    for le, count in zip(_BUCKET_LABELS, value.counts):
                        out.append((metric, f"{metric}_bucket", {**labels, "le": le}, help_text, count))
                    out.append((metric, f"{metric}_sum", labels, help_text, value.total_s))
        for kind, samples in by_kind.items():
            self.files[kind].write(samples)


def client_values(fair) -> dict[str, dict[str, Value]]:
    """Every known client's series values, from a core ``FairScheduler``."""
    values = {}
    for client, activity in fair.activity.items():
        row: dict[str, Value] = {"client_queued_requests": activity.queued,
                                 "client_running_requests": activity.running,
                                 "client_weight": fair.options.weight_of(client)}
        served = fair.ledger.get(client)
        if served is not None:
            row.update(client_input_tokens=served.input_tokens, client_cached_tokens=served.cached_tokens,
                       client_output_tokens=served.output_tokens, client_service=served.service,
                       client_preempted_requests=served.preempted,
                       client_recomputed_tokens=served.recomputed_tokens)
        latency = fair.latency.get(client)
        if latency is not None:
            row.update(client_queue_time_seconds=latency.queue_time,
                       client_time_to_first_token_seconds=latency.first_token,
                       client_e2e_request_latency_seconds=latency.end_to_end)
        counter = fair.policy.counter(client)
        if counter is not None:
            row["client_policy_state"] = counter
        values[client] = row
    return values


def cap_clients(values: dict[str, dict[str, Value]], max_clients: int) -> dict[str, dict[str, Value]]:
    """At most ``max_clients`` clients keep their own rows; the rest are summed under ``OVERFLOW_CLIENT``."""
    if len(values) <= max_clients:
        return values

    def rank(client: str) -> tuple:
        row = values[client]
        active = row.get("client_queued_requests", 0) + row.get("client_running_requests", 0) > 0
        return (not active, -row.get("client_service", 0.0), client)

    ordered = sorted(values, key=rank)
    kept = {client: values[client] for client in ordered[:max_clients]}
    other: dict[str, Value] = {}
    for client in ordered[max_clients:]:
        for name, value in values[client].items():
            if name in ("client_policy_state", "client_weight"):  # per-client state: no meaningful sum
                continue
            if isinstance(value, LatencyHistogram):
                total = other.get(name)
                if total is None:
                    total = other[name] = LatencyHistogram()
                total.merge(value)
            else:
                other[name] = other.get(name, 0.0) + value
    kept[OVERFLOW_CLIENT] = other
    return kept
