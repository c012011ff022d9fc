"""summary.json and the timeline, computed from records only.

The schema (``SCHEMA_VERSION``) is documented field by field in
docs/metrics.md; add fields, never rename or remove them, and bump the
version if a meaning changes.
"""

from __future__ import annotations

from sglang_fair.runs.records import RequestRecord
from sglang_fair.metrics.fairness import (
    jain_all_active,
    max_backlogged_service_diff,
    max_in_flight_service_diff,
    service_rates_in,
)
from sglang_fair.metrics.latency import distribution, program_latencies, request_latencies, ttfts
from sglang_fair.metrics.service import (
    ServiceWeights,
    active_interval,
    by_client,
    cumulative_service,
    done_records,
    outstanding,
    time_grid,
    windowed_rates,
)

SCHEMA_VERSION = 2  # 2: max_backlogged_service_diff counts only requests waiting for admission


def auto_window(records: list[RequestRecord]) -> float:
    """50 windows over the run (1 s for a run with nothing finished)."""
    end = max([r.t_done for r in done_records(records)] + [0.0])
    return end / 50 if end > 0 else 1.0


def cache_hit_rate(records: list[RequestRecord]) -> float | None:
    """Cached prompt tokens / prompt tokens over ok records that report cached_tokens."""
    rs = [r for r in records if r.ok and r.cached_tokens is not None]
    prompt = sum(r.prompt_tokens for r in rs)
    return sum(r.cached_tokens for r in rs) / prompt if prompt else None


def _counts(records: list[RequestRecord], weights: ServiceWeights) -> dict:
    ok = [r for r in records if r.ok]
    lat, failed = program_latencies(records)
    broken = set(failed)
    return {
        "requests": len(records),
        "requests_ok": len(ok),
        "requests_failed": len(records) - len(ok),
        "requests_throttled": sum(r.throttled for r in records),
        "programs": len(lat) + len(failed),
        "programs_ok": len(lat),
        "programs_failed": len(failed),
        "input_tokens": sum(r.prompt_tokens for r in ok),
        "cached_tokens": sum(r.cached_tokens or 0 for r in ok),
        "output_tokens": sum(r.output_tokens for r in ok),
        "service": sum(weights.service(r) for r in ok),
        # Tokens served to programs that then failed (e.g. throttled mid-way).
        "wasted_tokens": sum(r.prompt_tokens + r.output_tokens for r in ok if r.program_id in broken),
    }


def summarize(
    records: list[RequestRecord],
    *,
    weights: ServiceWeights | None = None,
    well_behaved: dict[str, bool] | None = None,
    window_s: float | None = None,
    run: dict | None = None,
) -> dict:
    """The summary.json dict. ``well_behaved`` overrides the records' flags per client."""
    weights = weights or ServiceWeights()
    window_s = window_s or auto_window(records)
    groups = by_client(records)
    flags = {c: (well_behaved or {}).get(c, all(r.well_behaved for r in rs)) for c, rs in groups.items()}
    done = done_records(records)
    t_start = min((r.t_sent for r in records), default=0.0)
    t_end = max((r.t_done for r in done), default=t_start)
    duration = t_end - t_start
    counts = _counts(records, weights)
    jain, interval = jain_all_active(records, weights)
    rates = service_rates_in(records, interval, weights) if interval else {}
    lat, _ = program_latencies(records)
    owner = {r.program_id: r.client for r in records}
    wb_lat = [v for pid, v in lat.items() if flags[owner[pid]]]
    overall = {
        **counts,
        "duration_s": duration,
        "throughput": {
            "service_per_s": counts["service"] / duration if duration > 0 else None,
            "input_tokens_per_s": counts["input_tokens"] / duration if duration > 0 else None,
            "output_tokens_per_s": counts["output_tokens"] / duration if duration > 0 else None,
            "requests_per_s": counts["requests_ok"] / duration if duration > 0 else None,
        },
        "jain_index": jain,
        "jain_interval_s": list(interval) if interval else None,
        "well_behaved_program_latency_s": distribution(wb_lat),
        "program_latency_s": distribution(list(lat.values())),
        "ttft_s": distribution(ttfts(records)),
        "request_latency_s": distribution(request_latencies(records)),
        "cache_hit_rate": cache_hit_rate(records),
        # Delivered service counts extend tokens, as the schedulers charge them (docs/metrics.md).
        "max_backlogged_service_diff": max_backlogged_service_diff(
            records, ServiceWeights(weights.w_input, weights.w_output, "extend")),
        "max_in_flight_service_diff": max_in_flight_service_diff(records, weights, window_s / 4),
    }
    clients = {}
    for c, rs in groups.items():
        clat, _ = program_latencies(rs)
        span = active_interval(rs)
        clients[c] = {
            "well_behaved": flags[c],
            **_counts(rs, weights),
            "service_rate_all_active": rates.get(c),
            "active_interval_s": list(span) if span else None,
            "program_latency_s": distribution(list(clat.values())),
            "ttft_s": distribution(ttfts(rs)),
            "request_latency_s": distribution(request_latencies(rs)),
            "cache_hit_rate": cache_hit_rate(rs),
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "run": run or {},
        "service_weights": {"input": weights.w_input, "output": weights.w_output, "input_mode": weights.input_mode},
        "window_s": window_s,
        "overall": overall,
        "clients": clients,
    }


TIMELINE_COLUMNS = ("window_start_s", "window_end_s", "client", "service_rate", "cumulative_service", "outstanding")


def timeline(records: list[RequestRecord], weights: ServiceWeights, window_s: float) -> list[dict]:
    """One row per (window, client): service rate in the window, cumulative
    service and outstanding requests at the window end."""
    grid = time_grid(records, window_s)
    rows = []
    for c, rs in by_client(records).items():
        cum = cumulative_service(rs, grid, weights)
        rate = windowed_rates(cum, grid)
        busy = outstanding(rs, grid)
        for k in range(len(grid) - 1):
            rows.append({"window_start_s": float(grid[k]), "window_end_s": float(grid[k + 1]), "client": c,
                         "service_rate": float(rate[k]), "cumulative_service": float(cum[k + 1]),
                         "outstanding": int(busy[k + 1])})
    rows.sort(key=lambda r: (r["window_start_s"], r["client"]))
    return rows
