"""The data-parallel router's gauges as ``/metrics`` shows them (``binding/controller/router_metrics.py``)."""

from __future__ import annotations

import re

_HELD = re.compile(r"^sglang_fair_router_held_requests(?:\{\})? (\S+)$", re.M)
_INFLIGHT = re.compile(r'^sglang_fair_router_inflight_requests\{dp_rank="\d+"\} (\S+)$', re.M)


def held_and_inflight(metrics_text: str) -> tuple[float, list[float]]:
    """Requests the router holds, and each worker's requests in flight (empty before the first refresh)."""
    return sum(map(float, _HELD.findall(metrics_text))), [float(v) for v in _INFLIGHT.findall(metrics_text)]
