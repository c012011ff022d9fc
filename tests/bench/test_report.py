"""The demo's side-by-side table (the demo itself is README's main command)."""

from __future__ import annotations

from sglang_fair.demo import client_table


def _summary(service: dict[str, float], p50: dict[str, float]) -> dict:
    return {"clients": {c: {"well_behaved": c != "flooder", "service": service[c],
                            "program_latency_s": {"p50": p50[c]},
                            "request_latency_s": {"max": p50[c] * 2}} for c in service}}


def test_client_table_puts_policies_side_by_side():
    table = client_table({
        "lpm": _summary({"flooder": 900.0, "light": 10.0}, {"flooder": 1.0, "light": 60.0}),
        "dlpm": _summary({"flooder": 800.0, "light": 110.0}, {"flooder": 3.0, "light": 2.5}),
    })
    lines = table.splitlines()
    assert "lpm service" in lines[0] and "dlpm done" in lines[0] and "dlpm wait" in lines[0]
    light = next(line for line in lines if line.startswith("light"))
    assert "60.0s" in light and "120.0s" in light and "2.5s" in light and "5.0s" in light and "110.0" in light
    assert next(line for line in lines if line.startswith("flooder")).split()[1] == "NO"
