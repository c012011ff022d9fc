"""The DLPM paper's evaluation grid on the simulator.

For ToT, long-context QA and LLM-as-a-judge under S1 and S2 (configs/*_s1 /
*_s2 with paper-scale lengths and the scenarios' Gamma arrivals) at D = 1, 2,
4, 8, runs the paper's systems and writes a table of throughput, Jain's
index, well-behaved clients' P50 / P99 program latency, cache hit rate and a
fairness audit (the largest service gap between clients both waiting, against
the bound of the configuration, as ``python -m sglang_fair.bench audit``
computes it), then the targets the default router is held to. The request
rate grows with D as in the paper: the scenario is generated BASE_COPIES x D
times with different seeds and merged, arrivals compressed by RATE_SCALE.
Each worker is a simulated H100 serving Llama-3.1-8B with the KV pool SGLang
would give it (``h100_kv_pool_tokens``); ``--small-pool`` adds rows with a
60,000-token pool, where the cache, not the arrival rate, is the bottleneck.
``--sweeps`` also writes the Q^u sweep (Fig. 1) and the Q^w sweep (Fig. 10).

    PYTHONPATH=. python bench/sim_trends.py --out docs/sim-trends [--small-pool] [--sweeps] [--workers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

from sglang_fair.metrics.backlog import max_backlogged_gap
from sglang_fair.metrics.bounds import bound_for
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
# Load per worker: BASE_COPIES draws of the scenario per worker, arrivals
# compressed by RATE_SCALE, so that one simulated H100 has to queue.
BASE_COPIES = {"tot": 4, "qa": 2, "judge": 3}
RATE_SCALE = {"tot": 2.5, "qa": 5.0, "judge": 5.0}

# name -> (local policy, router); D = 1 uses the policy alone.
SYSTEMS = {
    "fcfs": ("fcfs", "round_robin"),
    "rr+lpm": ("lpm", "round_robin"),
    "vtc": ("vtc", "per_client_round_robin"),
    "preble": ("lpm", "preble"),
    "d2lpm-paper": ("dlpm", "d2lpm"),  # Algorithm 2 as published
    "d2lpm": ("dlpm", "d2lpm_global"),  # the default router of --policy dlpm --dp N
}
DEFAULT, PEER, BASELINE = "d2lpm", "preble", "vtc"

# An H100 80GB serving Llama-3.1-8B in bf16 under SGLang 0.5.23's defaults
# (arg_groups/memory_hook.handle_gpu_memory_settings: chunked prefill 8,192 on
# an 80 GB card, activations reserved as 512 MiB + 1.5 MiB per chunk token +
# 128 MiB, CUDA-graph buffers not counted).
H100_MEMORY_MIB = 81_559
SGLANG_RESERVED_MIB = 512 + 1.5 * 8192 + 128
LLAMA_8B_WEIGHT_BYTES = 8.03e9 * 2
LLAMA_8B_KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16
SMALL_POOL_TOKENS = 60_000
SMALL_POOL_CELLS = (("tot", "s2", 4), ("qa", "s1", 8))


def h100_kv_pool_tokens() -> int:
    """KV pool per worker: (GPU memory - SGLang's reserve) - weights, in tokens."""
    static = (H100_MEMORY_MIB - SGLANG_RESERVED_MIB) * 2**20
    return int((static - LLAMA_8B_WEIGHT_BYTES) // LLAMA_8B_KV_BYTES_PER_TOKEN)


def scaled_workload(workload: str, scenario: str, copies: int, seed: int) -> Workload:
    """``copies`` independent draws of the scenario merged: the same clients at ``copies`` x the rate."""
    programs = []
    for k in range(copies):
        wl = make_workload(workload, scenario, PAPER_SCALE[workload], seed + 1000 * k)
        for p in wl.programs:
            programs.append(replace(p, program_id=f"{k}:{p.program_id}", arrival=p.arrival / RATE_SCALE[workload]))
    programs.sort(key=lambda p: (p.arrival, p.program_id))
    return Workload(f"{workload}-{scenario}-x{copies}", programs, seed=seed, meta=wl.meta)


SIM = {"kv_pool_tokens": h100_kv_pool_tokens(), "lpm_queue_limit": 128}  # set from the command line


def run_one(wl: Workload, policy: str, router: str, workers: int, seed: int, fair: dict | None = None,
            router_options: dict | None = None, **sim: object) -> dict:
    backend = SimBackend(policy=policy, seed=seed, num_workers=workers, router=router if workers > 1 else "round_robin",
                         fair=fair, router_options=(router_options or {}) if workers > 1 else {}, **(SIM | sim))
    result = backend.run(wl, progress=False)
    s = summarize(result.records)["overall"]
    wb = s["well_behaved_program_latency_s"]
    ok = [r for r in result.records if r.ok]
    bound = bound_for(result.params, max(r.prompt_tokens for r in ok), max(r.output_tokens for r in ok))
    gap = max_backlogged_gap(result.records, bound.measure)
    return {
        "throughput": s["throughput"]["service_per_s"],
        "jain": s["jain_index"],
        "wb_p50": wb["p50"],
        "wb_p99": wb["p99"],
        "hit_rate": s["cache_hit_rate"],
        "requests": s["requests"],
        "ok": s["requests_ok"],
        "gap": gap.value if gap is not None else 0.0,
        "bound": bound.value,
        "theorem": bound.name if bound.theorem else None,
        "kv_pool_tokens": (SIM | sim)["kv_pool_tokens"],
        "sim_time_s": result.meta["sim_time_s"],
        "extrapolated": result.meta["extrapolated"],
        "wall_s": result.meta["wall_s"],
    }


def grid(args) -> list[dict]:
    cells = [(w, sc, d, SIM["kv_pool_tokens"]) for w in args.workloads for sc in ("s1", "s2") for d in args.workers]
    if args.small_pool:
        cells += [(w, sc, d, SMALL_POOL_TOKENS) for w, sc, d in SMALL_POOL_CELLS
                  if w in args.workloads and d in args.workers]
    rows, t0 = [], time.perf_counter()
    for workload, scenario, d, pool in cells:
        wl = scaled_workload(workload, scenario, BASE_COPIES[workload] * d, args.seed)
        for name, (policy, router) in SYSTEMS.items():
            if d == 1 and router not in ("round_robin", "d2lpm"):
                continue  # one worker: one row per local policy (preble/vtc/d2lpm rows would repeat it)
            label = name if d > 1 else {"d2lpm-paper": "dlpm"}.get(name, name)
            r = run_one(wl, policy, router, d, args.seed, kv_pool_tokens=pool)
            rows.append({"workload": workload, "scenario": scenario, "D": d, "system": label} | r)
            print(f"[{time.perf_counter() - t0:6.0f}s] {workload} {scenario} D={d} pool={pool} {label:11s} "
                  f"thr={r['throughput']:9.0f} jain={_f(r['jain'])} p50={_f(r['wb_p50'])} p99={_f(r['wb_p99'])} "
                  f"hit={_f(r['hit_rate'])} gap/bound={r['gap'] / r['bound']:.3f} ({r['ok']}/{r['requests']})",
                  flush=True)
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
    others = {name: run_one(wl4, pol, rt, d, args.seed) for name, (pol, rt) in SYSTEMS.items() if name != "d2lpm-paper"}
    res["qw_baselines"] = others
    fig, ax = plt.subplots(figsize=(5, 4))
    qs = [r["quantum"] for r in res["qw"]]
    ax.plot(qs, [r["throughput"] for r in res["qw"]], "o-", label="D2LPM (paper) throughput")
    for name, r in others.items():
        ax.axhline(r["throughput"], ls=":", lw=1, label=name, color=f"C{list(others).index(name) + 1}")
    ax.set_xscale("log")
    ax.set_xlabel("Q^w")
    ax.set_ylabel("throughput (service / s)")
    ax2 = ax.twinx()
    ax2.plot(qs, [r["jain"] for r in res["qw"]], "o--", color="k", label="D2LPM (paper) Jain")
    ax2.set_ylabel("Jain's index")
    ax.set_title(f"ToT S1, D={d}, KV pool {SIM['kv_pool_tokens']} tokens/worker (simulated)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "qw_sweep.png", dpi=120)
    return res


def _f(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | scenario | D | KV pool | system | throughput (service/s) | Jain | WB P50 (s) | WB P99 (s) "
             "| hit rate | gap / bound | bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["gap"] / r["bound"]
        bound = r["theorem"] or "reference (no theorem)"
        lines.append(f"| {r['workload']} | {r['scenario']} | {r['D']} | {r['kv_pool_tokens']} | {r['system']} | "
                     f"{r['throughput']:.0f} | {_f(r['jain'])} | {_f(r['wb_p50'])} | {_f(r['wb_p99'])} | "
                     f"{_f(r['hit_rate'])} | {ratio:.3f}{' **over**' if ratio > 1 else ''} | {bound} |")
    return "\n".join(lines) + "\n"


def targets(rows: list[dict]) -> str:
    """The default router against Preble and VTC, cell by cell (D > 1, full pool)."""
    by = {(r["workload"], r["scenario"], r["D"], r["kv_pool_tokens"], r["system"]): r for r in rows}
    pool = SIM["kv_pool_tokens"]
    lines = ["| cell | d2lpm / preble (target) | d2lpm-paper / preble | d2lpm / vtc | Jain >= 0.9 | "
             "WB P99 <= preble's | within bound | rr+lpm over bound |",
             "|---|---|---|---|---|---|---|---|"]
    misses = 0
    for (w, sc, d, p, name), r in by.items():
        if name != DEFAULT or p != pool or d == 1:
            continue
        peer, base = by[(w, sc, d, p, PEER)], by[(w, sc, d, p, BASELINE)]
        paper, rr = by[(w, sc, d, p, "d2lpm-paper")], by[(w, sc, d, p, "rr+lpm")]
        want = 0.8 if (w, sc, d) == ("qa", "s2", 8) else 0.95
        checks = [r["throughput"] >= want * peer["throughput"], (r["jain"] or 0) >= 0.9,
                  (r["wb_p99"] or 0) <= (peer["wb_p99"] or 0), r["gap"] <= r["bound"]]
        vs_vtc = f"{r['throughput'] / base['throughput']:.2f}"
        if (w, sc, d) == ("tot", "s2", 4):
            checks.append(r["throughput"] >= 1.5 * base["throughput"])
            vs_vtc += f" ({'PASS' if checks[-1] else 'MISS'} >= 1.5)"
        misses += not all(checks)
        mark = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
        lines.append(f"| {w} {sc} D={d} | {r['throughput'] / peer['throughput']:.2f} ({mark(checks[0])} >= {want}) | "
                     f"{paper['throughput'] / peer['throughput']:.2f} | {vs_vtc} | {_f(r['jain'])} {mark(checks[1])} | "
                     f"{_f(r['wb_p99'])} vs {_f(peer['wb_p99'])} {mark(checks[2])} | "
                     f"{r['gap'] / r['bound']:.3f} {mark(checks[3])} | {rr['gap'] / rr['bound']:.3f} |")
    return "\n".join(lines) + f"\n\n{misses} cell(s) miss at least one target.\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/sim-trends")
    ap.add_argument("--workloads", default="tot,qa,judge", type=lambda s: s.split(","))
    ap.add_argument("--workers", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweeps", action="store_true", help="also the Q^u and Q^w sweeps (plots)")
    ap.add_argument("--no-grid", action="store_true", help="only the sweeps")
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
    if not args.no_grid:
        rows = grid(args)
        (out / "grid.json").write_text(json.dumps(rows, indent=1) + "\n")
        head = (f"Command: `PYTHONPATH=. python bench/sim_trends.py {' '.join(sys.argv[1:])}` "
                f"({time.perf_counter() - t0:.0f} s on one core).\n\n"
                f"Simulated workers: profile h100-llama-3.1-8b; KV pool {SIM['kv_pool_tokens']:,} tokens per worker "
                f"= ({H100_MEMORY_MIB:,} MiB H100 - {SGLANG_RESERVED_MIB:,.0f} MiB SGLang reserve - "
                f"{LLAMA_8B_WEIGHT_BYTES / 1e9:.2f} GB weights) / {LLAMA_8B_KV_BYTES_PER_TOKEN:,} B per token; "
                f"lpm_queue_limit {SIM['lpm_queue_limit']}. Arrivals: each scenario's Gamma process (CV 2), "
                f"{BASE_COPIES} draws per worker compressed by {RATE_SCALE}, so the rate grows with D. "
                f"`gap / bound`: the largest service gap between two clients both waiting for admission, over "
                f"the bound of the configuration (`python -m sglang_fair.bench audit`); systems without a "
                f"theorem are held to the D²LPM-shaped reference 2D(U + Q^u).\n\n")
        (out / "grid.md").write_text(head + "## Targets of the default router (`d2lpm`)\n\n" + targets(rows)
                                     + "\n## All runs\n\n" + markdown(rows))
    if args.sweeps:
        (out / "sweeps.json").write_text(json.dumps(sweeps(args, out), indent=1) + "\n")
    print(f"done in {time.perf_counter() - t0:.0f} s; results in {out}")


if __name__ == "__main__":
    main()
