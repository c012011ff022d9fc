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

A client whose state is dropped as idle loses its series; if it returns, its
cumulative values start again from 0.
"""

from __future__ import annotations

import time

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


class ClientMetrics:
    def __init__(self, dp_rank: int | None) -> None:
        from prometheus_client import Gauge  # after SGLang set PROMETHEUS_MULTIPROC_DIR

        self.dp_rank = str(dp_rank if dp_rank is not None else 0)
        self.gauges = {
            name: Gauge(f"sglang_fair:{name}", doc, ["client", "dp_rank"], multiprocess_mode="mostrecent")
            for name, doc in _GAUGES.items()
        }
        self._next_update = 0.0

    def forget(self, clients: list[str]) -> None:
        """Remove the series of clients whose state was dropped as idle."""
        for client in clients:
            for gauge in self.gauges.values():
                try:
                    gauge.remove(client, self.dp_rank)
                except KeyError:  # never exported (e.g. no counter for this policy)
                    pass

    def maybe_update(self, fair_policy) -> None:
        now = time.monotonic()
        if now < self._next_update:
            return
        self._next_update = now + 1.0
        fair = fair_policy.fair
        for client, activity in fair.activity.items():
            values = {
                "client_queued_requests": activity.queued,
                "client_running_requests": activity.running,
            }
            served = fair.ledger.get(client)
            if served is not None:
                values.update(
                    client_input_tokens=served.input_tokens,
                    client_cached_tokens=served.cached_tokens,
                    client_output_tokens=served.output_tokens,
                    client_service=served.service,
                    client_preempted_requests=served.preempted,
                    client_recomputed_tokens=served.recomputed_tokens,
                )
            counter = fair.policy.counter(client)
            if counter is not None:
                values["client_counter"] = counter
            for name, value in values.items():
                self.gauges[name].labels(client, self.dp_rank).set(value)
