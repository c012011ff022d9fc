"""The Grafana dashboard shipped in configs/monitoring, read as tests need it."""

from __future__ import annotations

import json
import re

from sglang_fair.workloads.spec import CONFIG_DIR

DASHBOARD = CONFIG_DIR / "monitoring" / "grafana-dashboard.json"


def panels() -> list[dict]:
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def concrete(expr: str, rate_window: str = "30s") -> str:
    """``expr`` as Prometheus runs it once Grafana has filled in the variables (all clients)."""
    return expr.replace("$__rate_interval", rate_window).replace('client=~"$client"', 'client=~".*"')


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"sglang_fair_[a-z0-9_]+", expr))
