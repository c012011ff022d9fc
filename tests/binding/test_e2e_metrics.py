"""Per-client gauges on the real server stay fresh when it goes idle (aborted streams included)."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from sglang_fair.testing.server import LocalServer

pytestmark = pytest.mark.server


def _gauge(server, name: str, client: str) -> float | None:
    with urllib.request.urlopen(server.url("/metrics"), timeout=30) as resp:
        text = resp.read().decode()
    found = re.findall(rf'^sglang_fair_{name}\{{[^}}]*client="{client}"[^}}]*\}} (\S+)$', text, re.M)
    return sum(float(v) for v in found) if found else None


def _abandoned_stream(server, client: str) -> None:
    """Start a long streamed generation, read its first chunk, hang up."""
    body = json.dumps({"input_ids": list(range(1, 40)), "stream": True,
                       "sampling_params": {"max_new_tokens": 1500, "ignore_eos": True}}).encode()  # context: 2048
    req = urllib.request.Request(server.url("/generate"), data=body,
                                 headers={"Content-Type": "application/json", "X-Client-Id": client})
    resp = urllib.request.urlopen(req, timeout=120)
    resp.readline()
    resp.close()


def test_running_gauge_returns_to_zero_within_seconds_after_aborted_streams():
    args = ["--policy", "dlpm", "--enable-metrics"]
    with LocalServer(module="sglang_fair.launch_server", extra_args=args, skip_tokenizer_init=True) as server:
        for _ in range(3):
            _abandoned_stream(server, "streamer")
        deadline = time.monotonic() + 10.0  # SGLang notices the hang-up, aborts, then the idle tick refreshes
        running = None
        while time.monotonic() < deadline:
            running = _gauge(server, "client_running_requests", "streamer")
            if running == 0 and _gauge(server, "client_queued_requests", "streamer") == 0:
                break
            time.sleep(0.25)
        assert running == 0, f"client_running_requests still {running} on an idle server"
        assert _gauge(server, "client_output_tokens_total", "streamer") > 0
