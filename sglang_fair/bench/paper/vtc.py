"""VTC paper §5, the synthetic workloads (Figs. 3-10) and its artifact's two-client overload
service rates.

The paper ran Llama-2-7B on an A10G with a 10,000-token KV pool. Here: the H100 Llama-3.1-8B
profile with that same 10,000-token pool (the pool is what makes a client backlogged), and
every arrival rate x ``RATE_X`` because an H100 decodes that batch faster than an A10G; the
scenarios are configs/synthetic_*.yaml (Fig. 3 is built here: 90 and 180 requests a minute)."""

from __future__ import annotations

import copy

import yaml

from sglang_fair.bench.paper.claims import Check, ClaimRow, make_row
from sglang_fair.bench.paper.common import (
    backlogged,
    percentile,
    plot_service_rates,
    ratio,
    response_times,
    scenario,
    service_in,
    simulate,
)
from sglang_fair.bench.paper.figure import Figure, FigureRun
from sglang_fair.workloads.spec import scenario_path

PAPER = "vtc"
VTC_POOL = 10_000  # the paper's KV pool on the A10G
RATE_X = 6.0  # an H100 with that pool serves ~5.8x the artifact's 1,352 service/s (Fig. 3, measured)
QUICK_TIME_X = 0.1  # quick: every phase a tenth as long
# The artifact's 2-client overload (A10G, Llama-2-7B): received service per second.
ARTIFACT = {"vtc": (668.0, 684.0), "fcfs": (438.0, 877.0)}
SETUP = f"simulated H100, Llama-3.1-8B, KV pool {VTC_POOL:,} (the paper's), rates x{RATE_X:g} (paper: Llama-2-7B, A10G)"
FIG3 = {"workload": "synthetic", "name": "vtc-fig3", "seed": 0, "vocab_size": 1024,
        "defaults": {"arrival": "uniform", "input_tokens": 256, "output_tokens": 256, "duration": 300},
        "clients": [{"name": "c1", "rate": 1.5}, {"name": "c2", "rate": 3.0, "well_behaved": False}]}


def scaled(raw: dict, rate_x: float, time_x: float) -> dict:
    """The scenario with every rate x ``rate_x`` and every duration x ``time_x``."""
    raw = copy.deepcopy(raw)
    for part in [raw.get("defaults", {}), *raw["clients"]]:
        for k in ("rate", "end_rate"):
            if part.get(k) is not None:
                part[k] *= rate_x
        if part.get("duration") is not None:
            part["duration"] *= time_x
        if part.get("on_off") is not None:
            part["on_off"] = [v * time_x for v in part["on_off"]]
        for ph in part.get("phases") or []:
            ph["rate"] *= rate_x
            if ph.get("end_rate") is not None:
                ph["end_rate"] *= rate_x
            ph["duration"] *= time_x
    return raw


def _load(raw: dict, ctx: FigureRun):
    raw = scaled(raw, RATE_X, QUICK_TIME_X if ctx.quick else 1.0)
    return scenario(raw, ctx.opts.seed)


def _span(wl) -> float:
    return max(p.arrival for p in wl.programs)


def fig3(ctx: FigureRun) -> ClaimRow:
    wl = _load(FIG3, ctx)
    runs = {name: simulate(ctx, wl, name, kv_pool_tokens=VTC_POOL) for name in ("vtc", "fcfs")}
    t = _span(wl)
    plot_service_rates(runs, ctx.dir / "fig3.png", "VTC Fig. 3: two overloaded clients (90, 180 req/min x"
                       f"{RATE_X:g})", window=max(1.0, t / 20))
    checks, got = [], []
    for name, (a1, a2) in ARTIFACT.items():
        s = service_in(runs[name]["records"], t / 3, t)  # after the queues built up
        ours = ratio(s.get("c1"), s.get("c2"))
        got.append(f"{name} c1/c2 {ours:.3f} vs artifact {a1 / a2:.3f}" if ours is not None else f"{name}: n/a")
        checks.append(Check(f"{name.upper()}: |c1/c2 service ratio / artifact's - 1|",
                            None if ours is None else abs(ours / (a1 / a2) - 1), "<=", 0.10))
    return make_row(PAPER, "3", "two backlogged clients get equal service under VTC (FCFS: in proportion "
                    "to their rates); artifact 668 vs 684 (VTC), 438 vs 877 (FCFS)", checks, SETUP, ctx.dir,
                    ctx.quick, note="; ".join(got))


def synthetic(number: str, config: str, claim: str):
    """A figure of configs/synthetic_<config>.yaml: VTC within Theorem 4.4's bound between
    backlogged clients, and the well-behaved clients' P99 response no worse than FCFS's."""

    def run(ctx: FigureRun) -> ClaimRow:
        raw = yaml.safe_load(scenario_path("synthetic", config).read_text())
        wl = _load(raw, ctx)
        runs = {name: simulate(ctx, wl, name, kv_pool_tokens=VTC_POOL) for name in ("vtc", "fcfs")}
        plot_service_rates(runs, ctx.dir / f"fig{number}.png", f"VTC Fig. {number}: synthetic_{config}",
                           window=max(1.0, _span(wl) / 30))
        good = sorted({p.client for p in wl.programs if p.well_behaved})
        p99 = {n: percentile(response_times(r["records"], good), 99) for n, r in runs.items()}
        v = runs["vtc"]
        gap = ratio(v.get("gap"), v.get("bound")) if v.get("bound") else None
        bad = sorted({p.client for p in wl.programs if not p.well_behaved})
        checks = [Check(f"precondition: {', '.join(bad)} backlogged under VTC (share of the run)",
                        backlogged(v["records"], bad), ">=", 0.25, pre=True),
                  Check("VTC: max service gap between backlogged clients / Theorem 4.4 bound", gap, "<=", 1.0),
                  Check(f"well-behaved ({', '.join(good)}) P99 response, VTC / FCFS", ratio(p99["vtc"], p99["fcfs"]),
                        "<=", 1.0)]
        return make_row(PAPER, number, claim, checks, SETUP, ctx.dir, ctx.quick,
                        note=f"VTC audit: {v.get('audit_error') or 'ok'}")

    return Figure(number, f"synthetic_{config}", run)


FIGURES = [
    Figure("3", "two overloaded clients: service rates against the artifact", fig3),
    synthetic("4", "fig4", "an overloaded client takes the capacity the others leave, and only that"),
    synthetic("5", "onoff", "an ON/OFF client under its share is served at once; the total rate stays flat"),
    synthetic("7", "poisson", "with Poisson arrivals and different lengths, backlogged clients still get equal "
              "service"),
    synthetic("9", "ramp", "a client ramping past its share is held to it; the other is unaffected"),
    synthetic("10", "shift", "through phase shifts VTC stays fair (no inherited deficit, unlike LCF)"),
]
