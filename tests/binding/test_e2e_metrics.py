"""Per-client gauges on the real server stay fresh when it goes idle (aborted streams included)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.support.http import client_metric, metrics_text, wait_until

pytestmark = pytest.mark.server


def _gauge(server, name: str, client: str) -> float | None:
    return client_metric(metrics_text(server, timeout=30), name, client)


def _abandoned_stream(server, client: str) -> None:
    """Start a long streamed generation, read its first chunk, hang up."""
    body = json.dumps({"input_ids": list(range(1, 40)), "stream": True,
                       "sampling_params": {"max_new_tokens": 1500, "ignore_eos": True}}).encode()  # context: 2048
    req = urllib.request.Request(server.url("/generate"), data=body,
                                 headers={"Content-Type": "application/json", "X-Client-Id": client})
    resp = urllib.request.urlopen(req, timeout=120)
    resp.readline()
    resp.close()


def test_running_gauge_returns_to_zero_within_seconds_after_aborted_streams(dlpm_server):
    server = dlpm_server  # --policy dlpm --enable-metrics, shared
    for _ in range(3):
        _abandoned_stream(server, "streamer")
    # SGLang notices the hang-up, aborts, then the idle tick refreshes: within 10 s.
    wait_until(lambda: (_gauge(server, "client_running_requests", "streamer"),
                        _gauge(server, "client_queued_requests", "streamer")),
               lambda gauges: gauges == (0, 0), timeout_s=10.0,
               what="client_running_requests and client_queued_requests at 0 on an idle server")
    assert _gauge(server, "client_output_tokens_total", "streamer") > 0
