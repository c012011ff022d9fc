"""The DLPM paper's evaluation trends on the simulator (issue 4, item 6).

For ToT, long-context QA and LLM-as-a-judge under S1 and S2 (configs/*_s1 /
*_s2 with paper-scale lengths) at D = 1, 2, 4, 8, runs the paper's systems
and writes a table of throughput, Jain's index and well-behaved clients' P50 /
P99 program latency; ``--sweeps`` also writes the Q^u sweep (Fig. 1) and the
Q^w sweep (Fig. 10) as plots. The request rate grows with D as in the paper:
the scenario is generated BASE_COPIES x D times with different seeds and
merged, arrivals compressed by RATE_SCALE.

    PYTHONPATH=. python bench/sim_trends.py --out docs/sim-trends [--sweeps] [--workers 1,2,4,8] [--kv-pool 60000]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

from sglang_fair.metrics.summary import summarize
from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Workload
from sglang_fair.workloads.registry import make_workload

# Paper-scale lengths (DLPM paper Table 2); the configs are scaled for the tiny CPU model.
PAPER_SCALE = {
    "tot": {"template_tokens": 400, "question_tokens": 70, "step_tokens": 16, "thought_tokens": 256},
    "qa": {"doc_tokens": 21449, "question_tokens": 24, "answer_tokens": 15},
    "judge": {"article_tokens": 2701, "criterion_tokens": 32, "verdict_tokens": 256, "merge_tokens": 48,
              "verdict_summary_tokens": 64, "merge_output_tokens": 256},
}
# Load per worker, chosen by hand so that one simulated H100 (420k-token pool) has to queue:
# BASE_COPIES draws of the scenario per worker, arrivals compressed by RATE_SCALE.
BASE_COPIES = {"tot": 4, "qa": 2, "judge": 3}
RATE_SCALE = {"tot": 2.5, "qa": 5.0, "judge": 5.0}

# name -> (local policy, router); D = 1 uses the policy alone.
SYSTEMS = {
    "fcfs": ("fcfs", "round_robin"),
    "rr+lpm": ("lpm", "round_robin"),
    "vtc": ("vtc", "per_client_round_robin"),
    "d2lpm": ("dlpm", "d2lpm"),
    "preble": ("lpm", "preble"),
}


def scaled_workload(workload: str, scenario: str, copies: int, seed: int) -> Workload:
    """``copies`` independent draws of the scenario merged: the same clients at ``copies`` x the rate."""
    programs = []
    for k in range(copies):
        wl = make_workload(workload, scenario, PAPER_SCALE[workload], seed + 1000 * k)
        for p in wl.programs:
            programs.append(replace(p, program_id=f"{k}:{p.program_id}", arrival=p.arrival / RATE_SCALE[workload]))
    programs.sort(key=lambda p: (p.arrival, p.program_id))
    return Workload(f"{workload}-{scenario}-x{copies}", programs, seed=seed, meta=wl.meta)


SIM = {"kv_pool_tokens": 60_000, "lpm_queue_limit": 128}  # set from the command line


def run_one(wl: Workload, policy: str, router: str, workers: int, seed: int, fair: dict | None = None,
            router_options: dict | None = None, **sim: object) -> dict:
    backend = SimBackend(policy=policy, seed=seed, num_workers=workers, router=router if workers > 1 else "round_robin",
                         fair=fair, router_options=(router_options or {}) if workers > 1 else {}, **(SIM | sim))
    result = backend.run(wl, progress=False)
    s = summarize(result.records)["overall"]
    wb = s["well_behaved_program_latency_s"]
    return {
        "throughput": s["throughput"]["service_per_s"],
        "jain": s["jain_index"],
        "wb_p50": wb["p50"],
        "wb_p99": wb["p99"],
        "hit_rate": s["cache_hit_rate"],
        "requests": s["requests"],
        "ok": s["requests_ok"],
        "sim_time_s": result.meta["sim_time_s"],
        "extrapolated": result.meta["extrapolated"],
        "wall_s": result.meta["wall_s"],
    }


def grid(args) -> list[dict]:
    rows = []
    for workload in args.workloads:
        for scenario in ("s1", "s2"):
            for d in args.workers:
                wl = scaled_workload(workload, scenario, BASE_COPIES[workload] * d, args.seed)
                for name, (policy, router) in SYSTEMS.items():
                    if name == "preble" and d == 1:
                        continue  # a multi-worker dispatcher (omitted at D=1 in the paper too)
                    r = run_one(wl, policy, router, d, args.seed)
                    rows.append({"workload": workload, "scenario": scenario, "D": d, "system": name} | r)
                    print(f"{workload} {scenario} D={d} {name:7s} thr={r['throughput']:9.0f} "
                          f"jain={_f(r['jain'])} p50={_f(r['wb_p50'])} p99={_f(r['wb_p99'])} "
                          f"hit={_f(r['hit_rate'])} ({r['ok']}/{r['requests']}, {r['wall_s']:.1f}s)", flush=True)
    return rows


def sweeps(args, out: Path) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res: dict = {"qu": [], "qw": []}
    # Fig. 1 compares against an LPM that always sorts: lift SGLang's 128-request cap here.
    always_lpm = {"lpm_queue_limit": 1 << 30}
    wl = scaled_workload("tot", "s1", BASE_COPIES["tot"], args.seed)
    for q in (256, 1024, 4096, 16384, 65536, 262144, 1048576):
        r = run_one(wl, "dlpm", "round_robin", 1, args.seed, fair={"quantum": q}, **always_lpm)
        res["qu"].append({"quantum": q} | r)
        print(f"Q^u={q}: thr={r['throughput']:.0f} jain={_f(r['jain'])} p50={_f(r['wb_p50'])}", flush=True)
    base = {name: run_one(wl, name, "round_robin", 1, args.seed, **always_lpm) for name in ("lpm", "vtc", "fcfs")}
    res["qu_baselines"] = base
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, key, label in ((axes[0], "jain", "Jain's index (all clients active)"),
                           (axes[1], "wb_p50", "well-behaved P50 program latency (s)")):
        ax.plot([r[key] for r in res["qu"]], [r["throughput"] for r in res["qu"]], "o-", label="DLPM (Q^u sweep)")
        for r in res["qu"]:
            ax.annotate(str(r["quantum"]), (r[key], r["throughput"]), fontsize=7)
        for name, r in base.items():
            ax.plot([r[key]], [r["throughput"]], "s", label=name.upper())
        ax.set_xlabel(label)
        ax.set_ylabel("throughput (service / s)")
        ax.legend(fontsize=7)
    fig.suptitle(f"ToT S1, D=1, simulated H100 8B, KV pool {SIM['kv_pool_tokens']} tokens")
    fig.tight_layout()
    fig.savefig(out / "qu_sweep.png", dpi=120)

    d = 4
    wl4 = scaled_workload("tot", "s1", BASE_COPIES["tot"] * d, args.seed)
    for q in (500, 2000, 8000, 40000, 200000):
        r = run_one(wl4, "dlpm", "d2lpm", d, args.seed, router_options={"quantum": q})
        res["qw"].append({"quantum": q} | r)
        print(f"Q^w={q}: thr={r['throughput']:.0f} jain={_f(r['jain'])}", flush=True)
    others = {name: run_one(wl4, pol, rt, d, args.seed) for name, (pol, rt) in SYSTEMS.items() if name != "d2lpm"}
    res["qw_baselines"] = others
    fig, ax = plt.subplots(figsize=(5, 4))
    qs = [r["quantum"] for r in res["qw"]]
    ax.plot(qs, [r["throughput"] for r in res["qw"]], "o-", label="D2LPM throughput")
    for name, r in others.items():
        ax.axhline(r["throughput"], ls=":", lw=1, label=name, color=f"C{list(others).index(name) + 1}")
    ax.set_xscale("log")
    ax.set_xlabel("Q^w")
    ax.set_ylabel("throughput (service / s)")
    ax2 = ax.twinx()
    ax2.plot(qs, [r["jain"] for r in res["qw"]], "o--", color="k", label="D2LPM Jain")
    ax2.set_ylabel("Jain's index")
    ax.set_title(f"ToT S1, D={d}, KV pool {SIM['kv_pool_tokens']} tokens/worker (simulated)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "qw_sweep.png", dpi=120)
    return res


def _f(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | scenario | D | system | throughput (service/s) | Jain | WB P50 (s) | WB P99 (s) | hit rate |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['scenario']} | {r['D']} | {r['system']} | {r['throughput']:.0f} | "
                     f"{_f(r['jain'])} | {_f(r['wb_p50'])} | {_f(r['wb_p99'])} | {_f(r['hit_rate'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/sim-trends")
    ap.add_argument("--workloads", default="tot,qa,judge", type=lambda s: s.split(","))
    ap.add_argument("--workers", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweeps", action="store_true", help="also the Q^u and Q^w sweeps (plots)")
    ap.add_argument("--no-grid", action="store_true", help="only the sweeps")
    ap.add_argument("--kv-pool", type=int, default=SIM["kv_pool_tokens"],
                    help="KV pool per worker in tokens (small = a memory-bound GPU, where policies differ)")
    ap.add_argument("--lpm-queue-limit", type=int, default=SIM["lpm_queue_limit"],
                    help="SGLang sorts by prefix only up to this many waiting requests (grid; the Q^u sweep lifts it)")
    args = ap.parse_args()
    SIM.update(kv_pool_tokens=args.kv_pool, lpm_queue_limit=args.lpm_queue_limit)
    # Extrapolated steps are kept per run in grid.json / sweeps.json; no warning per run.
    logging.getLogger("sglang_fair.sim.backend").setLevel(logging.ERROR)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if not args.no_grid:
        rows = grid(args)
        (out / "grid.json").write_text(json.dumps(rows, indent=1) + "\n")
        head = (f"Command: `PYTHONPATH=. python bench/sim_trends.py {' '.join(sys.argv[1:])}`; "
                f"profile h100-llama-3.1-8b, KV pool {SIM['kv_pool_tokens']} tokens per worker, "
                f"lpm_queue_limit {SIM['lpm_queue_limit']}.\n\n")
        (out / "grid.md").write_text(head + markdown(rows))
    if args.sweeps:
        (out / "sweeps.json").write_text(json.dumps(sweeps(args, out), indent=1) + "\n")
    print(f"done in {time.perf_counter() - t0:.0f} s; results in {out}")


if __name__ == "__main__":
    main()
