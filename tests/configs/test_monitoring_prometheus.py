"""Every panel of the Grafana dashboard, evaluated by a real Prometheus scraping a real server.

A ``--dp 2`` server (the default ``d2lpm_global`` router, so the router's
panels have data too) serves two clients while Prometheus (Debian's package;
CI installs it) scrapes it every second; then each panel's query, with
Grafana's variables filled in, must return at least one series with a finite
value.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from sglang_fair.testing.server import LocalServer, pick_free_port
from tests.configs.monitoring import concrete, metric_names, panels
from tests.configs.test_monitoring import documented_series

pytestmark = pytest.mark.server

REQUIRE_ENV = "SGLANG_FAIR_REQUIRE_PROMETHEUS"  # set by .ci/run, which installs Prometheus
# The paper's d2lpm keeps a deficit per client and worker; this server runs d2lpm_global, whose
# deficit is cluster-wide (tests/binding/test_dp_controller.py scrapes d2lpm's).
NOT_UNDER_D2LPM_GLOBAL = {"sglang_fair_router_client_deficit"}


def _prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but no prometheus binary is on PATH")
        pytest.skip("Prometheus is not installed (Debian: apt-get install prometheus)")
    return found


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _traffic(server: LocalServer, stop: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        client = ("alice", "bob")[i % 2]
        body = json.dumps({"input_ids": [7] * 40 + [i % 50 + 1] * 8, "sampling_params": {"max_new_tokens": 4}}).encode()
        req = urllib.request.Request(server.url("/generate"), data=body,
                                     headers={"Content-Type": "application/json", "X-Client-Id": client})
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
        i += 1


def _query(base: str, expr: str) -> list[dict]:
    answer = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


@pytest.fixture
def prometheus_binary() -> str:
    return _prometheus_binary()


# Prometheus is found (or the test skipped) before the shared server is asked for: fixtures are set
# up in the order of the arguments.
def test_every_dashboard_panel_has_data_from_a_real_server(tmp_path: Path, prometheus_binary: str,
                                                            dlpm_dp2_server: LocalServer) -> None:
    binary, server = prometheus_binary, dlpm_dp2_server  # --policy dlpm --enable-metrics --dp 2, shared (tests/conftest.py)
    port = pick_free_port()
    config = tmp_path / "prometheus.yml"
    target = server.base_url.split("//", 1)[1]
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang-fair\n"
                      f"    static_configs:\n      - targets: ['{target}']\n")
    log = (tmp_path / "prometheus.log").open("w")
    prometheus = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    stop = threading.Event()
    sender = threading.Thread(target=_traffic, args=(server, stop), daemon=True)
    base = f"http://127.0.0.1:{port}"
    try:
        sender.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # Prometheus up, and scraping the server successfully
            try:
                up = _query(base, 'up{job="sglang-fair"}')
            except OSError:
                up = []
            if up and up[0]["value"][1] == "1":
                break
            time.sleep(0.5)
        else:
            pytest.fail("Prometheus never scraped the server; its log: " + (tmp_path / "prometheus.log").read_text()[-2000:])
        time.sleep(12)  # a dozen scrapes with traffic, so every rate() has points
        with urllib.request.urlopen(server.url("/metrics"), timeout=30) as resp:
            scraped = resp.read().decode()
        missing = [name for name in sorted(documented_series() - NOT_UNDER_D2LPM_GLOBAL)
                   if not re.search(rf"^{name}(_bucket|_sum|_count)?[{{ ]", scraped, re.M)]
        assert not missing, f"documented but not in a real scrape: {missing}"
        empty = []
        for panel in panels():
            for target in panel["targets"]:
                if metric_names(target["expr"]) <= NOT_UNDER_D2LPM_GLOBAL:
                    continue
                expr = concrete(target["expr"])
                values = [float(series["value"][1]) for series in _query(base, expr)]
                if not any(math.isfinite(v) for v in values):
                    empty.append((panel["title"], expr, values))
        assert not empty, empty
    finally:
        stop.set()
        prometheus.terminate()
        prometheus.wait(timeout=30)
        log.close()
        sender.join(timeout=120)
