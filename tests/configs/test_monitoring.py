"""The Grafana dashboard asks only for series sglang-fair exports, and says what each panel shows."""

from __future__ import annotations

import re
from pathlib import Path

from sglang_fair.binding.scheduler.client_metrics import SERIES
from tests.configs.monitoring import metric_names, panels

_SUFFIXES = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}


def _exported() -> set[str]:
    names = {f"sglang_fair_{name}{suffix}" for name, (kind, _) in SERIES.items() for suffix in _SUFFIXES[kind]}
    names.add("sglang_fair_quantum")
    source = (Path(__file__).resolve().parents[2] / "sglang_fair" / "binding" / "controller" / "router_metrics.py").read_text()
    return names | {f"sglang_fair_{n}" for n in re.findall(r'(router_[a-z_]+)"', source)}


def test_every_panel_queries_exported_series_and_explains_itself() -> None:
    exported = _exported()
    found = panels()
    assert len(found) >= 15
    for panel in found:
        assert panel["title"] and panel["description"], panel["id"]
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = metric_names(target["expr"])
            assert names and names <= exported, (panel["title"], names - exported)


def test_the_dashboard_covers_every_per_client_series() -> None:
    used = set().union(*(metric_names(t["expr"]) for p in panels() for t in p["targets"]))
    for name in SERIES:
        assert any(u.startswith(f"sglang_fair_{name}") for u in used), name


def documented_series() -> set[str]:
    """Every series docs/configuration.md lists in its metric tables."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    return set(re.findall(r"^\| `(sglang_fair_[a-z_]+)` \|", text, re.M))


def test_every_documented_series_is_exported_and_on_the_dashboard() -> None:
    documented = documented_series()
    assert {"sglang_fair_client_service_total", "sglang_fair_router_client_deficit",
            "sglang_fair_router_unrouted_requests"} <= documented
    exported = _exported()
    used = set().union(*(metric_names(t["expr"]) for p in panels() for t in p["targets"]))
    for name in documented:
        family = {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        assert family & exported, f"{name} is documented but not exported"
        assert family & used, f"{name} is documented but on no dashboard panel"
    no_gauge_named_like_a_counter = [n for n, (kind, _) in SERIES.items()
                                     if kind == "gauge" and n.endswith(("_counter", "_total"))]
    assert not no_gauge_named_like_a_counter
