"""DLPM paper, the sweeps and the grid: Fig. 1 (Q^u on one worker), Fig. 7 (throughput, Jain,
latency over workloads x scenarios x D), Fig. 10 (Q^w on four workers), Fig. 11 (5 to 50
clients on one worker at a constant total rate).

Figs. 1, 7 and 10 run what ``benchmarks/experiments/sim_trends.py`` runs (the paper's lengths,
Gamma arrivals, ``sglang_fair.bench.paper_grid``), on simulated H100s serving Llama-3.1-8B
(the paper: A100s for Fig. 7, A10/A10G GPUs elsewhere, Llama-3.2-3B)."""

from __future__ import annotations

import math

from sglang_fair.bench.paper.claims import Check, ClaimRow, make_row
from sglang_fair.bench.paper.common import QUICK_SIM, ratio, scenario
from sglang_fair.bench.paper.figure import Figure, FigureRun
from sglang_fair.bench.paper.grid import plot_relative, systems_at
from sglang_fair.bench.paper.sweeps import QU_QUANTA, QW_QUANTA, plot_qu, plot_qw, qu_sweep, qw_sweep
from sglang_fair.bench.paper_grid import DEFAULT, DURATION_S, LOAD, PAPER_SCALE, PEER, SIM, paper_workload, run_one

PAPER = "dlpm"
FIG11_OVERLOAD = 4.0
SETUP = "simulated H100 x{d}, Llama-3.1-8B, KV pool {pool:,} (paper: Llama-3.2-3B on {gpu})"


def _sim(ctx: FigureRun) -> dict:
    return QUICK_SIM if ctx.quick else {}


def _pool(ctx: FigureRun) -> int:
    return _sim(ctx).get("kv_pool_tokens", SIM["kv_pool_tokens"])


def _duration(ctx: FigureRun, quick_s: float) -> float:
    return quick_s if ctx.quick else DURATION_S


def _strip(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "records"} for r in rows]


def fig1(ctx: FigureRun) -> ClaimRow:
    import json

    wl = paper_workload("tot", "s1", 1, ctx.opts.seed, _duration(ctx, 4.0))
    quanta = (1024, 65536) if ctx.quick else QU_QUANTA
    res = qu_sweep(wl, ctx.opts.seed, quanta, log=ctx.log, run_dir=lambda n: ctx.dir / n, **_sim(ctx))
    plot_qu(res, ctx.dir / "fig1.png", f"DLPM Fig. 1: Q^u sweep, ToT S1, D=1, KV pool {_pool(ctx):,}")
    (ctx.dir / "sweep.json").write_text(json.dumps(
        {"qu": _strip(res["qu"]), "baselines": res["qu_baselines"]}, indent=1, default=str) + "\n")
    lo, hi = res["qu"][0], res["qu"][-1]
    base = res["qu_baselines"]
    checks = [Check("precondition: well-behaved clients waiting for admission under VTC (share)",
                    base["vtc"]["wb_waiting"], ">=", 0.25, pre=True),
              Check(f"throughput, DLPM Q^u={hi['quantum']} / Q^u={lo['quantum']}",
                    ratio(hi["throughput"], lo["throughput"]), ">=", 1.0),
              Check(f"throughput, DLPM Q^u={hi['quantum']} / VTC", ratio(hi["throughput"], base["vtc"]["throughput"]),
                    ">=", 1.0)]
    return make_row(PAPER, "1", "a larger Q^u buys throughput (towards LPM) at fairness's cost (towards VTC)",
                    checks, SETUP.format(d=1, pool=_pool(ctx), gpu="A10G"), ctx.dir, ctx.quick,
                    note=f"Jain Q^u={lo['quantum']}: {lo['jain'] or 0:.3f}, Q^u={hi['quantum']}: {hi['jain'] or 0:.3f}")


def fig7(ctx: FigureRun) -> ClaimRow:
    import json

    cells = ([("tot", "s1", 2)] if ctx.quick else
             [(w, s, d) for w in ("tot", "qa", "judge") for s in ("s1", "s2") for d in (1, 2, 4, 8)])
    rows = []
    for k, (w, s, d) in enumerate(cells, 1):
        wl = paper_workload(w, s, d, ctx.opts.seed, _duration(ctx, 3.0))
        for name, (policy, router, opts) in systems_at(d):
            tag = f"{w}-{s}-D{d}-{name.replace('+', '-')}"
            r = run_one(wl, policy, router, d, ctx.opts.seed, router_options=opts, run_dir=ctx.dir / tag, **_sim(ctx))
            rows.append({"workload": w, "scenario": s, "D": d, "system": name, "kv_pool_tokens": _pool(ctx)} | r)
            ctx.log(f"cell {k}/{len(cells)} {w} {s} D={d} {name}: thr={r['throughput']:,.0f} "
                    f"jain={r['jain'] or 0:.3f} ({r['wall_s']:.1f} s wall)")
    (ctx.dir / "grid.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    plot_relative(rows, _pool(ctx), ctx.dir / "fig7.png")
    by = {(r["workload"], r["scenario"], r["D"], r["system"]): r for r in rows}
    thr, p99 = [], []
    for (w, s, d, name), r in by.items():
        peer = by.get((w, s, d, PEER))
        if name != DEFAULT or peer is None or (w, s, d) == ("qa", "s2", 8):  # the paper's stated exception
            continue
        thr.append(ratio(r["throughput"], peer["throughput"]))
        p99.append(ratio(r["wb_p99"], peer["wb_p99"]))
    thr = [x for x in thr if x is not None]
    p99 = [x for x in p99 if x is not None]
    gmean = math.exp(sum(math.log(x) for x in p99) / len(p99)) if p99 and all(x > 0 for x in p99) else None
    checks = [Check("worst cell throughput, D2LPM / Preble", min(thr) if thr else None, ">=", 0.95),
              Check("well-behaved P99, D2LPM / Preble (geometric mean)", gmean, "<=", 1.0)]
    return make_row(PAPER, "7", "D2LPM matches or beats Preble's throughput with lower well-behaved latency",
                    checks, SETUP.format(d="1-8", pool=_pool(ctx), gpu="A100s") + f"; {len(cells)} cells",
                    ctx.dir, ctx.quick)


def fig10(ctx: FigureRun) -> ClaimRow:
    import json

    d = 4
    wl = paper_workload("tot", "s1", d, ctx.opts.seed, _duration(ctx, 2.0))
    quanta = (2000, 40000) if ctx.quick else QW_QUANTA
    res = qw_sweep(wl, d, ctx.opts.seed, quanta, log=ctx.log, run_dir=lambda n: ctx.dir / n, **_sim(ctx))
    plot_qw(res, d, ctx.dir / "fig10.png", f"DLPM Fig. 10: Q^w sweep, ToT S1, D={d}, KV pool {_pool(ctx):,}")
    (ctx.dir / "sweep.json").write_text(json.dumps(
        {"qw": _strip(res["qw"]), "baselines": res["qw_baselines"]}, indent=1, default=str) + "\n")
    lo, hi = res["qw"][0], res["qw"][-1]
    others = {n: r for n, r in res["qw_baselines"].items() if n != DEFAULT}
    best_name = max(others, key=lambda n: others[n]["throughput"])
    best = others[best_name]
    checks = [Check(f"throughput, D2LPM Q^w={hi['quantum']} / Q^w={lo['quantum']}",
                    ratio(hi["throughput"], lo["throughput"]), ">=", 1.0),
              Check(f"throughput, D2LPM Q^w={hi['quantum']} / best baseline",
                    ratio(hi["throughput"], best["throughput"]), ">=", 1.0)]
    # Why throughput moves with Q^w: the cache hit rate it buys, and the share of the run the
    # well-behaved clients waited for admission (what a larger Q^w gives up).
    measured = "; ".join(f"Q^w={r['quantum']}: {r['throughput']:,.0f} service/s, hit rate {r['hit_rate'] or 0:.3f}, "
                         f"well-behaved waiting {r['wb_waiting'] or 0:.3f}" for r in res["qw"])
    measured += (f"; best baseline {best_name}: {best['throughput']:,.0f} service/s, "
                 f"hit rate {best['hit_rate'] or 0:.3f}")
    return make_row(PAPER, "10", "throughput grows with Q^w and ends above every other scheduler", checks,
                    SETUP.format(d=d, pool=_pool(ctx), gpu="A100s"), ctx.dir, ctx.quick, note=measured)


def many_clients(n: int, quick: bool, seed: int):
    """ToT at the paper's lengths, ``n`` clients splitting one total rate (ToT S1's load, D = 1)."""
    t = 4.0 if quick else DURATION_S
    # tot S1's total (4 clients at 0.2 programs/s) x OVERLOAD: its clients are all well-behaved
    # here (no 4-branch client), and at tot S1's own total one H100 serves them without a queue.
    total = 4 * 0.2 * LOAD[("tot", "s1")] * (1.0 if quick else FIG11_OVERLOAD)
    rate = total / n
    clients = [{"name": f"c{k}", "rate": rate, "num_programs": max(1, round(rate * t))} for k in range(n)]
    return scenario({"workload": "tot", "name": f"tot-{n}-clients", "seed": seed, "vocab_size": 32000,
                     "defaults": {"arrival": "gamma", "cv": 2.0, **PAPER_SCALE["tot"]}, "clients": clients}, seed)


def fig11(ctx: FigureRun) -> ClaimRow:
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = (5, 50) if ctx.quick else (5, 10, 20, 30, 40, 50)
    res: dict[str, list[float]] = {"dlpm": [], "lpm": [], "vtc": []}
    waiting = None  # clients' share of the run waiting for admission, VTC at the largest count
    hits: dict[str, float | None] = {}  # cache hit rate at the largest count: what VTC's order would cost
    for n in counts:
        wl = many_clients(n, ctx.quick, ctx.opts.seed)
        for name in res:
            r = run_one(wl, name, "round_robin", 1, ctx.opts.seed, run_dir=ctx.dir / f"{name}-{n}", **_sim(ctx))
            res[name].append(r["throughput"])
            waiting = r["wb_waiting"] if name == "vtc" else waiting
            hits[name] = r["hit_rate"]
            ctx.log(f"{n} clients, {name}: {r['throughput']:,.0f} service/s ({r['wall_s']:.1f} s wall)")
    (ctx.dir / "service_rate.json").write_text(json.dumps({"clients": counts} | res, indent=1) + "\n")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, ys in res.items():
        ax.plot(counts, ys, "o-", label=name.upper())
    ax.set_xlabel("number of clients")
    ax.set_ylabel("service rate (service/s)")
    ax.set_title(f"DLPM Fig. 11: ToT, one simulated H100, KV pool {_pool(ctx):,}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(ctx.dir / "fig11.png", dpi=120)
    plt.close(fig)
    vs_lpm = min(ratio(a, b) or 0.0 for a, b in zip(res["dlpm"], res["lpm"]))
    checks = [Check(f"precondition: clients waiting for admission under VTC at {counts[-1]} clients (share)",
                    waiting, ">=", 0.25, pre=True),
              Check("worst count, DLPM / LPM service rate", vs_lpm, ">=", 0.95),
              Check(f"DLPM / VTC service rate at {counts[-1]} clients", ratio(res["dlpm"][-1], res["vtc"][-1]),
                    ">=", 1.3)]
    measured = (f"at {counts[-1]} clients, service/s: " + ", ".join(f"{n} {v[-1]:,.0f}" for n, v in res.items())
                + "; cache hit rate: " + ", ".join(f"{n} {h:.3f}" for n, h in hits.items() if h is not None))
    return make_row(PAPER, "11", "DLPM's service rate stays near LPM's from 5 to 50 clients; VTC's stays lower",
                    checks, SETUP.format(d=1, pool=_pool(ctx), gpu="an A10"), ctx.dir, ctx.quick, note=measured)


FIGURES = [Figure("1", "Q^u sweep (throughput vs fairness)", fig1),
           Figure("7", "the evaluation grid (throughput, Jain, latency)", fig7),
           Figure("10", "Q^w sweep", fig10),
           Figure("11", "5 to 50 clients at a constant total rate", fig11)]
