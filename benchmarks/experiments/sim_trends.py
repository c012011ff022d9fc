"""The DLPM paper's evaluation grid (§6.2, Fig. 7) on the simulator.

For ToT, long-context QA and LLM-as-a-judge under S1 and S2 (configs/*_s1 /
*_s2 with the paper's lengths, Table 2) at D = 1, 2, 4, 8, runs the paper's
systems and writes a table of throughput, Jain's index, well-behaved
clients' P50 / P99 program latency, cache hit rate and a fairness audit (the
largest service gap between two clients both waiting for admission, against
the bound of the configuration), then the targets the default router is held
to, and a plot of throughput relative to Preble.

Arrivals as in the paper (§6.1, "Synthetic Traces"): every client is one
Gamma process (the scenario's CV, 2) whose rate grows with the number of
GPUs: LOAD x D x the scenario's per-client rate, for ``--duration`` seconds
(num_programs = rate x duration). LOAD puts one worker at about twice what it
can serve, so the overload comes from the arrival rate, not from a starved
cache. Each worker is a simulated H100 serving Llama-3.1-8B with the KV pool
SGLang would give it (``h100_kv_pool_tokens`` of ``sglang_fair/bench/paper_grid.py``,
which holds what the grid shares with the other simulator experiments);
``--small-pool`` adds a few cells with a 60,000-token pool for comparison.

Every run is written as a run directory (records.jsonl, summary.json,
timeline.csv; no plots) under ``--runs-dir`` (default: a new temporary
directory, not committed) and audited with ``sglang_fair.bench.audit.audit_run``,
so ``python -m sglang_fair.bench audit RUNS_DIR/<run>`` reproduces the audit
column. ``--sweeps`` also writes the Q^u sweep (Fig. 1) and the Q^w sweep
(Fig. 10). ``--seeds N`` runs every target cell (of this run's or the last
grid.json) again with seeds 0..N-1, the default router and Preble on the same
arrivals, to tell a systematic loss from seed-to-seed noise (seeds.md).

    PYTHONPATH=. python benchmarks/experiments/sim_trends.py --out docs/sim-trends --small-pool [--sweeps] [--runs-dir DIR]
    PYTHONPATH=. python benchmarks/experiments/sim_trends.py --out docs/sim-trends --no-grid --seeds 5 --jobs 2
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import logging
import math
import re
import shlex
import sys
import tempfile
import time
from pathlib import Path

from sglang_fair.bench.paper.grid import plot_relative, systems_at
from sglang_fair.bench.paper.sweeps import plot_qu, plot_qw, qu_sweep, qw_sweep
from sglang_fair.bench.paper_grid import (
    BASELINE,
    DEFAULT,
    DURATION_S,
    H100_MEMORY_MIB,
    LLAMA_8B_KV_BYTES_PER_TOKEN,
    LLAMA_8B_WEIGHT_BYTES,
    LOAD,
    PAPER,
    PEER,
    SGLANG_CHUNKED_PREFILL,
    SGLANG_DECODE_GRAPH_MAX_BS,
    SGLANG_PREFILL_GRAPH_SIZES,
    SIM,
    SMALL_POOL_CELLS,
    SMALL_POOL_TOKENS,
    SYSTEMS,
    arrival_span,
    client_rates,
    mem_fraction_static,
    offered_service,
    paper_workload,
    run_one,
    sglang_reserved_mib,
)


def cells(args) -> list[tuple[str, str, int, int]]:
    out = [(w, sc, d, SIM["kv_pool_tokens"]) for w in args.workloads for sc in ("s1", "s2") for d in args.workers]
    if args.small_pool:
        out += [(w, sc, d, SMALL_POOL_TOKENS) for w, sc, d in SMALL_POOL_CELLS
                if w in args.workloads and d in args.workers]
    return out


def grid(args, runs_dir: Path) -> tuple[list[dict], list[dict]]:
    rows, loads, t0 = [], [], time.perf_counter()
    for workload, scenario, d, pool in cells(args):
        wl = paper_workload(workload, scenario, d, args.seed, args.duration, None if args.load_scale == 1
                            else LOAD[(workload, scenario)] * args.load_scale)
        load = {"workload": workload, "scenario": scenario, "D": d, "kv_pool_tokens": pool,
                "programs": len(wl.programs), "calls": wl.num_calls(), "arrival_span_s": arrival_span(wl),
                "offered_service": offered_service(wl)}
        loads.append(load)
        for name, (policy, router, opts) in systems_at(d):
            tag = f"{workload}-{scenario}-D{d}-{name.replace('+', '-')}" + ("" if pool == SIM["kv_pool_tokens"]
                                                                        else f"-pool{pool}")
            r = run_one(wl, policy, router, d, args.seed, router_options=opts, run_dir=runs_dir / tag,
                        kv_pool_tokens=pool)
            rows.append({"workload": workload, "scenario": scenario, "D": d, "system": name} | r)
            audit = (f"gap/bound={r['gap'] / r['bound']:.3f}{'' if r['theorem'] else ' (ref)'}" if "gap" in r
                     else f"AUDIT FAILED: {r['audit_error']}")
            print(f"[{time.perf_counter() - t0:6.0f}s] {workload} {scenario} D={d} pool={pool} {name:11s} "
                  f"thr={r['throughput']:9.0f} jain={_f(r['jain'])} p50={_f(r['wb_p50'])} p99={_f(r['wb_p99'])} "
                  f"hit={_f(r['hit_rate'])} {audit} ({r['ok']}/{r['requests']} req, {r['wall_s']:.1f}s sim)",
                  flush=True)
    return rows, loads


def sweeps(args, out: Path) -> dict:
    """Fig. 1 (Q^u, one worker) and Fig. 10 (Q^w, four workers): runs and plots shared with
    ``python -m sglang_fair.bench paper dlpm`` (sglang_fair/bench/paper/sweeps.py)."""
    wl = paper_workload("tot", "s1", 1, args.seed, args.duration)
    res = qu_sweep(wl, args.seed)
    plot_qu(res, out / "qu_sweep.png")
    d = 4
    res |= qw_sweep(paper_workload("tot", "s1", d, args.seed, args.duration), d, args.seed)
    plot_qw(res, d, out / "qw_sweep.png")
    return res


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _bound_label(r: dict) -> str:
    if "gap" not in r:
        return "audit failed"
    if not r["theorem"]:
        return "reference"
    m = re.search(r"Theorem (\S+)", r["bound_name"])
    return f"Thm {m.group(1)}" if m else r["bound_name"]


def _audit_cell(r: dict) -> str:
    if "gap" not in r:
        return f"failed: {r['audit_error']}"
    ratio = r["gap"] / r["bound"] if r["bound"] > 0 else math.inf
    verdict = ("within" if r["within"] else "**OVER**") if r["theorem"] else ("below" if r["within"] else "above")
    return f"{r['gap']:,.0f} / {r['bound']:,.0f} = {ratio:.3f}, {verdict}"


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | scenario | D | KV pool | system | throughput (service/s) | Jain | WB P50 (s) | WB P99 (s) "
             "| hit rate | WB waiting | audit: max gap / bound | bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['scenario']} | {r['D']} | {r['kv_pool_tokens']:,} | {r['system']} | "
                     f"{r['throughput']:,.0f} | {_f(r['jain'])} | {_f(r['wb_p50'])} | {_f(r['wb_p99'])} | "
                     f"{_f(r['hit_rate'])} | {_f(r['wb_waiting'])} | {_audit_cell(r)} | {_bound_label(r)} |")
    return "\n".join(lines) + "\n"


def load_table(loads: list[dict], rows: list[dict]) -> str:
    best = {}
    for r in rows:
        key = (r["workload"], r["scenario"], r["D"], r["kv_pool_tokens"])
        best[key] = max(best.get(key, 0.0), r["throughput"] or 0.0)
    lines = ["| workload | scenario | D | KV pool | programs | requests | last arrival (s) | offered (service/s) "
             "| offered / best throughput |", "|---|---|---|---|---|---|---|---|---|"]
    for x in loads:
        key = (x["workload"], x["scenario"], x["D"], x["kv_pool_tokens"])
        offered = x["offered_service"] / x["arrival_span_s"] if x["arrival_span_s"] > 0 else math.inf
        rel = f"{offered / best[key]:.2f}" if best.get(key) else "-"
        lines.append(f"| {x['workload']} | {x['scenario']} | {x['D']} | {x['kv_pool_tokens']:,} | {x['programs']:,} | "
                     f"{x['calls']:,} | {x['arrival_span_s']:.1f} | {offered:,.0f} | {rel} |")
    return "\n".join(lines) + "\n"


def target_checks(rows: list[dict], pool: int) -> list[dict]:
    """The default router against Preble and VTC, cell by cell (D > 1, the given pool)."""
    by = {(r["workload"], r["scenario"], r["D"], r["kv_pool_tokens"], r["system"]): r for r in rows}
    out = []
    for (w, sc, d, p, name), r in by.items():
        if name != DEFAULT or p != pool or d == 1:
            continue
        peer, base, paper = (by.get((w, sc, d, p, n)) for n in (PEER, BASELINE, PAPER))
        want = 0.8 if (w, sc, d) == ("qa", "s2", 8) else 0.95
        c = {"cell": f"{w} {sc} D={d}", "workload": w, "scenario": sc, "D": d, "min_vs_preble": want,
             "vs_preble": r["throughput"] / peer["throughput"] if peer else None,
             "paper_vs_preble": paper["throughput"] / peer["throughput"] if peer and paper else None,
             "vs_vtc": r["throughput"] / base["throughput"] if base else None,
             "jain": r["jain"], "wb_p99": r["wb_p99"], "preble_wb_p99": peer["wb_p99"] if peer else None,
             "gap_ratio": r["gap"] / r["bound"] if "gap" in r else None, "within": r.get("within")}
        c["pass"] = {"throughput": c["vs_preble"] is not None and c["vs_preble"] >= want,
                     "jain": (r["jain"] or 0) >= 0.9,
                     "p99": r["wb_p99"] is not None and c["preble_wb_p99"] is not None
                     and r["wb_p99"] <= c["preble_wb_p99"],
                     "bound": bool(r.get("within"))}
        if (w, sc, d) == ("tot", "s2", 4):
            c["pass"]["vs_vtc"] = c["vs_vtc"] is not None and c["vs_vtc"] >= 1.5
        out.append(c)
    return out


def targets_markdown(checks: list[dict]) -> str:
    mark = {True: "PASS", False: "MISS"}
    lines = ["| cell | d2lpm / preble throughput | d2lpm-paper / preble | d2lpm / vtc | d2lpm Jain >= 0.9 "
             "| WB P99: d2lpm <= preble (s) | d2lpm within Theorem G |", "|---|---|---|---|---|---|---|"]
    for c in checks:
        p = c["pass"]
        vs_vtc = _f(c["vs_vtc"]) + (f" {mark[p['vs_vtc']]} (>= 1.5)" if "vs_vtc" in p else "")
        gap = "-" if c["gap_ratio"] is None else f"{c['gap_ratio']:.3f}"
        lines.append(f"| {c['cell']} | {_f(c['vs_preble'])} {mark[p['throughput']]} (>= {c['min_vs_preble']}) | "
                     f"{_f(c['paper_vs_preble'])} | {vs_vtc} | {_f(c['jain'])} {mark[p['jain']]} | "
                     f"{_f(c['wb_p99'])} vs {_f(c['preble_wb_p99'])} {mark[p['p99']]} | "
                     f"{gap} {mark[p['bound']]} |")
    n = sum(len(c["pass"]) for c in checks)
    missed = {k: sum(not c["pass"][k] for c in checks if k in c["pass"])
              for k in ("throughput", "vs_vtc", "jain", "p99", "bound")}
    names = {"throughput": "throughput vs Preble", "vs_vtc": "ToT S2 D=4 vs VTC", "jain": "Jain",
             "p99": "WB P99 vs Preble", "bound": "Theorem G bound"}
    summary = ", ".join(f"{names[k]} {v}" for k, v in missed.items() if v) or "none"
    return ("\n".join(lines) + f"\n\n{n - sum(missed.values())} of {n} checks pass over {len(checks)} cells; "
            f"misses: {summary}.\n")


def header(args, wall_s: float, runs_dir: Path) -> str:
    pool = SIM["kv_pool_tokens"]
    rates = []
    for (w, sc) in LOAD:
        if w not in args.workloads:
            continue
        r = {n: v * args.load_scale for n, v in client_rates(w, sc, args.seed).items()}
        good = sorted({round(v, 4) for n, v in r.items() if n != "bad"})
        desc = f"{w} {sc.upper()} " + "/".join(f"{v:g}" for v in good)
        if "bad" in r and round(r["bad"], 4) not in good:
            desc += f" (misbehaving client {r['bad']:g})"
        rates.append(desc)
    reserved = sglang_reserved_mib()
    return (
        f"Command: `PYTHONPATH=. python benchmarks/experiments/sim_trends.py {' '.join(shlex.quote(a) for a in sys.argv[1:])}` "
        f"({wall_s / 60:.1f} min wall on the shared 2-core machine, one process).\n\n"
        f"**Workers.** Simulated H100s, cost-model profile h100-llama-3.1-8b. KV pool {pool:,} tokens per worker "
        f"= (mem_fraction_static x GPU memory - weights) / KV bytes per token = ({mem_fraction_static()} x "
        f"{H100_MEMORY_MIB:,} MiB - {LLAMA_8B_WEIGHT_BYTES / 1e9:.2f} GB) / {LLAMA_8B_KV_BYTES_PER_TOKEN:,} B, "
        f"where SGLang 0.5.23 sets mem_fraction_static = round((GPU - reserved) / GPU, 3) with reserved = "
        f"512 + 1.5 x {SGLANG_CHUNKED_PREFILL} (chunked prefill) + 128 (tp/8 GiB) + 2 x {SGLANG_DECODE_GRAPH_MAX_BS} "
        f"(decode CUDA graphs) + 8 x {SGLANG_PREFILL_GRAPH_SIZES} (prefill CUDA graphs) = {reserved:,.0f} MiB "
        f"(arg_groups/memory_hook.py), and Llama-3.1-8B has 8.03 B bf16 parameters and 32 layers x 8 KV heads x "
        f"128 dims x (K, V) x 2 B per token. lpm_queue_limit {SIM['lpm_queue_limit']} (SGLang). "
        + (f"Sensitivity cells ({', '.join(f'{w} {s.upper()} D={d}' for w, s, d in SMALL_POOL_CELLS)}) are "
           f"repeated with a {SMALL_POOL_TOKENS:,}-token pool. " if args.small_pool else "")
        + f"\n\n**Arrivals** (DLPM paper §6.1): every client is one Gamma process (CV 2, the scenario's) "
        f"sending programs for {args.duration:g} s; the rate grows with D: D x these programs/s per client at "
        f"D = 1: {'; '.join(rates)}. That offers one worker about twice the service LPM delivers on it (the "
        f"load table below gives the offered service per cell), so queues build from the arrival rate. "
        f"Lengths are the paper's (Table 2); client mixes are Table 3's (configs/*_s1.yaml, *_s2.yaml).\n\n"
        f"**Systems.** `fcfs` (D = 1 only: behind round-robin it repeats `rr+lpm`), `rr+lpm` (LPM workers, "
        f"round-robin), `vtc` (VTC workers, per-client round-robin: "
        f"the paper's distributed VTC), `preble` (LPM workers, Preble-style router), `d2lpm-paper` (DLPM "
        f"workers, Q^u 2,048, behind the paper's Algorithm 2 router `d2lpm`, Q^w 10,000: the router default, "
        f"mid-range of the paper's Fig. 10 sweep; the paper gives no Q^w for Fig. 7), `d2lpm` (DLPM workers "
        f"behind `d2lpm_global`, cluster-wide DLPM with late binding, default options: what `--policy dlpm "
        f"--dp N` runs). At D = 1 there is no router: one row per local policy.\n\n"
        f"**Columns.** Throughput: service (1 x prompt + 2 x output tokens) per second over the run. Jain: over "
        f"the interval when all clients are active (docs/metrics.md). WB P50/P99: well-behaved clients' program "
        f"latency (end-to-end; for QA too, where the paper reports TTFT). WB waiting: the mean share of that "
        f"interval in which a well-behaved "
        f"client had a request waiting for admission; a client that is rarely waiting is limited by its own "
        f"demand (e.g. a ToT tree's dependencies), and then Jain's index measures demand, not the scheduler. "
        f"Audit: the largest |W_f - W_g| over intervals in which clients f and g both have a request waiting for "
        f"admission (metrics/backlog.py), against `bound_for` (metrics/bounds.py) of the run's parameters: "
        f"Thm 4.1 (DLPM), 4.4 (VTC), 5.1 (D²LPM), G (d2lpm_global); `reference` = the D²LPM-shaped bound "
        f"2D(U + Q^u) for systems without a theorem (below / above it proves nothing). Every run was written "
        f"to a run directory (records.jsonl, summary.json, timeline.csv; no plots) under `--runs-dir` "
        f"(this time {runs_dir}, not committed) and audited with `sglang_fair.bench.audit.audit_run`: "
        f"`python -m sglang_fair.bench audit RUNS_DIR/<workload>-<scenario>-D<d>-<system>` reproduces a row.\n\n"
    )


def _seed_run(job: tuple[str, str, int, int]) -> dict:
    """One (cell, seed): the default router and Preble on the same arrivals."""
    w, sc, d, seed = job
    wl = paper_workload(w, sc, d, seed)
    got = {name: run_one(wl, SYSTEMS[name][0], SYSTEMS[name][1], d, seed, router_options=SYSTEMS[name][2])
           for name in (DEFAULT, PEER)}
    mine, peer = got[DEFAULT], got[PEER]
    return {"cell": f"{w} {sc} D={d}", "seed": seed, "vs_preble": mine["throughput"] / peer["throughput"],
            "wb_p99": mine["wb_p99"], "preble_wb_p99": peer["wb_p99"],
            "p99_ratio": mine["wb_p99"] / peer["wb_p99"], "jain": mine["jain"], "preble_jain": peer["jain"]}


def seed_spread(checks: list[dict], seeds: int, jobs: int = 1) -> tuple[list[dict], str]:
    """Every target cell of ``checks`` run with seeds 0..``seeds``-1: rows and a markdown summary."""
    work = [(c["workload"], c["scenario"], c["D"], seed) for c in checks for seed in range(seeds)]
    rows = []
    pool = concurrent.futures.ProcessPoolExecutor(jobs) if jobs > 1 else None
    with pool or contextlib.nullcontext():
        for r in (pool.map if pool else map)(_seed_run, work):
            rows.append(r)
            print(f"[{len(rows)}/{len(work)}] {r['cell']} seed {r['seed']}: throughput {r['vs_preble']:.3f}x "
                  f"Preble's, WB P99 {r['p99_ratio']:.3f}x, Jain {r['jain']:.3f}", flush=True)
    lines = ["| cell | d2lpm / preble throughput: mean (min-max) | seeds >= target | "
             "d2lpm / preble WB P99: mean (min-max) | seeds d2lpm slower | d2lpm Jain (min-max) | "
             "preble Jain (min-max) |", "|---|---|---|---|---|---|---|"]
    for c in checks:
        mine = [r for r in rows if r["cell"] == c["cell"]]
        thr, p99 = [r["vs_preble"] for r in mine], [r["p99_ratio"] for r in mine]
        jain, peer_jain = [r["jain"] for r in mine], [r["preble_jain"] for r in mine]
        lines.append(
            f"| {c['cell']} | {_spread(thr)} | {sum(x >= c['min_vs_preble'] for x in thr)} of {len(thr)} "
            f"(>= {c['min_vs_preble']}) | {_spread(p99)} | {sum(x > 1 for x in p99)} of {len(p99)} | "
            f"{min(jain):.3f}-{max(jain):.3f} | {min(peer_jain):.3f}-{max(peer_jain):.3f} |")
    return rows, "\n".join(lines) + "\n"


def _spread(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/sim-trends")
    ap.add_argument("--workloads", default="tot,qa,judge", type=lambda s: s.split(","))
    ap.add_argument("--workers", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration", type=float, default=DURATION_S, help="seconds of arrivals per run")
    ap.add_argument("--load-scale", type=float, default=1.0, help="multiply every arrival rate (LOAD) by this")
    ap.add_argument("--runs-dir", type=Path, default=None,
                    help="where run directories go (default: a new temporary directory)")
    ap.add_argument("--sweeps", action="store_true", help="also the Q^u and Q^w sweeps (plots)")
    ap.add_argument("--no-grid", action="store_true", help="no grid: only the sweeps or --seeds (on grid.json)")
    ap.add_argument("--seeds", type=int, default=0, metavar="N",
                    help="run every target cell again with seeds 0..N-1, d2lpm and Preble (seeds.md)")
    ap.add_argument("--jobs", type=int, default=1, help="processes for --seeds (runs are independent)")
    ap.add_argument("--small-pool", action="store_true",
                    help=f"also a few cells with a {SMALL_POOL_TOKENS}-token KV pool per worker (sensitivity)")
    ap.add_argument("--kv-pool", type=int, default=SIM["kv_pool_tokens"],
                    help="KV pool per worker in tokens (default: an H100 serving Llama-3.1-8B under SGLang)")
    ap.add_argument("--lpm-queue-limit", type=int, default=SIM["lpm_queue_limit"],
                    help="SGLang sorts by prefix only up to this many waiting requests (grid; the Q^u sweep lifts it)")
    args = ap.parse_args()
    SIM.update(kv_pool_tokens=args.kv_pool, lpm_queue_limit=args.lpm_queue_limit)
    # Extrapolated steps are kept per run in grid.json / sweeps.json; no warning per run.
    logging.getLogger("sglang_fair.sim.backend").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs_dir = None
    if not args.no_grid:
        runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="sim-trends-runs-"))
        print(f"run directories: {runs_dir}", flush=True)
        rows, loads = grid(args, runs_dir)
        wall = time.perf_counter() - t0
        checks = target_checks(rows, SIM["kv_pool_tokens"])
        (out / "grid.json").write_text(json.dumps({
            "kv_pool_tokens": SIM["kv_pool_tokens"], "duration_s": args.duration, "load": {
                f"{w}-{s}": m * args.load_scale for (w, s), m in LOAD.items()},
            "wall_s": wall, "loads": loads, "targets": checks, "rows": rows}, indent=1) + "\n")
        plot_relative(rows, SIM["kv_pool_tokens"], out / "grid.png")
        text = (header(args, wall, runs_dir)
                + "## Targets of the default router (`d2lpm` = `d2lpm_global`)\n\n"
                "Per cell with D > 1 and the full pool: throughput >= 0.95 x Preble's (QA S2 D=8: >= 0.8), "
                "Jain >= 0.9, well-behaved P99 <= Preble's, and on ToT S2 D=4 throughput >= 1.5 x VTC's; "
                "the audit column is informative (a Theorem G violation would be a bug). "
                "Plot: [grid.png](grid.png) (throughput / Preble's for d2lpm, d2lpm-paper, vtc).\n\n"
                + targets_markdown(checks)
                + "\n## Load per cell\n\n" + load_table(loads, rows)
                + "\n## All runs\n\n" + markdown(rows))
        (out / "grid.md").write_text(text)
        print("\n" + targets_markdown(checks))
    if args.sweeps:
        (out / "sweeps.json").write_text(json.dumps(sweeps(args, out), indent=1) + "\n")
    if args.seeds:
        checks = json.loads((out / "grid.json").read_text())["targets"]
        rows, table = seed_spread(checks, args.seeds, args.jobs)
        (out / "seeds.json").write_text(json.dumps(rows, indent=1) + "\n")
        (out / "seeds.md").write_text(
            "# The default router's targets over seeds\n\n"
            f"`PYTHONPATH=. python benchmarks/experiments/sim_trends.py --out {args.out} --no-grid --seeds {args.seeds} "
            f"--jobs {args.jobs}`: every target cell of grid.md (D > 1, full pool) run again with seeds "
            f"0..{args.seeds - 1} (seed 0 is the grid's run; a seed draws the arrivals and the programs); "
            "`d2lpm` and `preble` see the same arrivals under each seed. Ratios are d2lpm's over Preble's; "
            "per-seed rows are in seeds.json.\n\n" + table)
    print(f"done in {time.perf_counter() - t0:.0f} s; results in {out}"
          + (f"; run directories in {runs_dir}" if runs_dir else ""))


if __name__ == "__main__":
    main()
