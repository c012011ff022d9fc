"""Per-client series are read back as SGLang's /metrics reads them: prometheus_client's
multiprocess collector over the directory, here a temporary one."""

from __future__ import annotations

import os

import pytest

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client import multiprocess  # noqa: E402

from sglang_fair.binding.scheduler.client_metrics import OVERFLOW_CLIENT, ClientMetrics, cap_clients, client_values  # noqa: E402
from sglang_fair.core import FairOptions  # noqa: E402
from sglang_fair.core.fair_scheduler import FairScheduler  # noqa: E402


def _scrape(directory) -> dict[tuple[str, str], float]:
    registry = prometheus_client.CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(directory))
    return {(sample.name, sample.labels.get("client")): sample.value
            for metric in registry.collect() for sample in metric.samples if sample.name.startswith("sglang_fair_")}


def _scheduler_with(clients: list[str], now: list[float] | None = None) -> FairScheduler:
    now = now if now is not None else [0.0]
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=100, idle_timeout_s=10), clock=lambda: now[0])
    for i, client in enumerate(clients):
        fair.enqueue(f"r{i}", client, 10 + i)
    return fair


def test_series_follow_the_clients_the_scheduler_knows(tmp_path) -> None:
    metrics = ClientMetrics(0, directory=str(tmp_path))
    now = [0.0]
    fair = _scheduler_with(["alice", "bob"], now)
    metrics.write(client_values(fair))
    scraped = _scrape(tmp_path)
    assert scraped[("sglang_fair_client_queued_requests", "alice")] == 1
    assert ("sglang_fair_client_policy_state", "bob") in scraped
    for tracked in list(fair.requests.values()):
        if tracked.client == "bob":
            fair.finish(tracked)
    now[0] = 60.0
    assert fair.collect_idle() == ["bob"]  # idle past the timeout; alice still has a request queued
    metrics.write(client_values(fair))
    scraped = _scrape(tmp_path)
    assert not [key for key in scraped if key[1] == "bob"]  # really gone, not only hidden
    assert scraped[("sglang_fair_client_queued_requests", "alice")] == 1
    # One file per kind, no temporary file left.
    assert sorted(os.listdir(tmp_path)) == ["counter_sglangfair-dp0.db", "gauge_mostrecent_sglangfair-dp0.db",
                                            "histogram_sglangfair-dp0.db"]


def test_the_file_does_not_grow_with_clients_that_came_and_went(tmp_path) -> None:
    metrics = ClientMetrics(0, directory=str(tmp_path), max_clients=100_000)
    metrics.write({f"c{i}": {"client_service": float(i)} for i in range(20_000)})
    counters = metrics.files["counter"].path
    big = os.path.getsize(counters)
    metrics.write({"alice": {"client_service": 1.0}})
    assert os.path.getsize(counters) < big / 10
    assert len(_scrape(tmp_path)) == 1


def test_clients_beyond_the_cap_are_summed_under_one_label(tmp_path) -> None:
    values = {f"c{i}": {"client_service": float(i), "client_queued_requests": 0.0, "client_policy_state": 5.0}
              for i in range(10)}
    values["waiting"] = {"client_service": 0.0, "client_queued_requests": 2.0}
    capped = cap_clients(values, max_clients=3)
    # Clients with requests in the scheduler first, then the most served.
    assert list(capped) == ["waiting", "c9", "c8", OVERFLOW_CLIENT]
    assert capped[OVERFLOW_CLIENT] == {"client_service": float(sum(range(8))), "client_queued_requests": 0.0}
    metrics = ClientMetrics(1, directory=str(tmp_path), max_clients=3)
    metrics.write(values)
    assert _scrape(tmp_path)[("sglang_fair_client_service_total", OVERFLOW_CLIENT)] == 28.0


def test_a_bad_cap_is_refused(monkeypatch, tmp_path) -> None:
    from sglang_fair.binding.common.settings import MAX_CLIENTS_ENV, max_metrics_clients

    monkeypatch.setenv(MAX_CLIENTS_ENV, "zero")
    with pytest.raises(ValueError, match=MAX_CLIENTS_ENV):
        max_metrics_clients()
    monkeypatch.setenv(MAX_CLIENTS_ENV, "25")
    assert ClientMetrics(0, directory=str(tmp_path)).max_clients == 25


def test_totals_are_counters_and_latencies_histograms(tmp_path) -> None:
    now = [0.0]
    fair = _scheduler_with(["alice"], now)
    (tracked,) = fair.requests.values()
    now[0] = 0.3
    fair.admit(tracked, cached_len=4)
    now[0] = 0.5
    fair.produced(tracked, 3)
    now[0] = 2.0
    fair.finish(tracked)
    ClientMetrics(0, directory=str(tmp_path)).write(client_values(fair))
    registry = prometheus_client.CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    families = {m.name: m for m in registry.collect() if m.name.startswith("sglang_fair_")}
    assert families["sglang_fair_client_output_tokens"].type == "counter"
    assert families["sglang_fair_client_queued_requests"].type == "gauge"
    samples = {(s.name, s.labels.get("le")): s.value for m in families.values() for s in m.samples}
    assert samples[("sglang_fair_client_output_tokens_total", None)] == 3
    assert samples[("sglang_fair_client_input_tokens_total", None)] == 10
    e2e = "sglang_fair_client_e2e_request_latency_seconds"
    assert families[e2e].type == "histogram"
    # Cumulative buckets as Prometheus expects them: 2.0 s falls in (1.0, 2.5].
    assert samples[(f"{e2e}_bucket", "1.0")] == 0 and samples[(f"{e2e}_bucket", "2.5")] == 1
    assert samples[(f"{e2e}_bucket", "+Inf")] == 1 and samples[(f"{e2e}_count", None)] == 1
    assert samples[(f"{e2e}_sum", None)] == pytest.approx(2.0)
    assert samples[("sglang_fair_client_queue_time_seconds_sum", None)] == pytest.approx(0.3)
    assert samples[("sglang_fair_client_time_to_first_token_seconds_sum", None)] == pytest.approx(0.5)


def test_overflow_clients_latencies_are_merged(tmp_path) -> None:
    from sglang_fair.core.client_latency import LatencyHistogram

    rows = {}
    for i in range(5):
        hist = LatencyHistogram()
        hist.observe(0.1 * (i + 1))
        rows[f"c{i}"] = {"client_service": float(i), "client_queue_time_seconds": hist}
    capped = cap_clients(rows, max_clients=2)
    merged = capped[OVERFLOW_CLIENT]["client_queue_time_seconds"]
    assert merged.count == 3 and merged.total_s == pytest.approx(0.1 + 0.2 + 0.3)
    assert rows["c0"]["client_queue_time_seconds"].count == 1  # the clients' own histograms are untouched
