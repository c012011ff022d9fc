"""The DLPM paper's quantum sweeps on ToT S1 at its scale, shared by ``bench paper dlpm`` (Figs. 1
and 10) and ``benchmarks/experiments/sim_trends.py --sweeps``: the runs and their plots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sglang_fair.bench.paper_grid import PAPER, SIM, SYSTEMS, run_one
from sglang_fair.workloads.model import Workload

QU_QUANTA = (256, 1024, 4096, 16384, 65536, 262144, 1048576)
QW_QUANTA = (500, 2000, 8000, 40000, 200000)
# Fig. 1 compares against an LPM that always sorts: lift SGLang's 128-request cap.
ALWAYS_LPM = {"lpm_queue_limit": 1 << 30}

RunDir = Callable[[str], "Path | None"]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def qu_sweep(wl: Workload, seed: int, quanta: tuple[int, ...] = QU_QUANTA, log: Callable[[str], None] = print,
             run_dir: RunDir = lambda name: None, **sim: object) -> dict:
    """Fig. 1: DLPM at each Q^u on one worker, and LPM, VTC, FCFS on the same arrivals."""
    res: dict = {"qu": []}
    for q in quanta:
        r = run_one(wl, "dlpm", "round_robin", 1, seed, fair={"quantum": q}, run_dir=run_dir(f"dlpm-qu{q}"),
                    **(ALWAYS_LPM | sim))
        res["qu"].append({"quantum": q} | r)
        log(f"Q^u={q}: thr={r['throughput']:.0f} jain={_fmt(r['jain'])} p50={_fmt(r['wb_p50'])}")
    res["qu_baselines"] = {name: run_one(wl, name, "round_robin", 1, seed, run_dir=run_dir(name), **(ALWAYS_LPM | sim))
                           for name in ("lpm", "vtc", "fcfs")}
    return res


def plot_qu(res: dict, path: Path, title: str | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, key, label in ((axes[0], "jain", "Jain's index (all clients active)"),
                           (axes[1], "wb_p50", "well-behaved P50 program latency (s)")):
        ax.plot([r[key] for r in res["qu"]], [r["throughput"] for r in res["qu"]], "o-", label="DLPM (Q^u sweep)")
        for r in res["qu"]:
            ax.annotate(str(r["quantum"]), (r[key], r["throughput"]), fontsize=7)
        for name, r in res["qu_baselines"].items():
            ax.plot([r[key]], [r["throughput"]], "s", label=name.upper())
        ax.set_xlabel(label)
        ax.set_ylabel("throughput (service / s)")
        ax.legend(fontsize=7)
    fig.suptitle(title or f"ToT S1, D=1, simulated H100 8B, KV pool {SIM['kv_pool_tokens']:,} tokens")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def qw_sweep(wl: Workload, d: int, seed: int, quanta: tuple[int, ...] = QW_QUANTA,
             log: Callable[[str], None] = print, run_dir: RunDir = lambda name: None, **sim: object) -> dict:
    """Fig. 10: the paper's D2LPM router at each Q^w on ``d`` workers, and every other system."""
    res: dict = {"qw": []}
    for q in quanta:
        r = run_one(wl, "dlpm", "d2lpm", d, seed, router_options={"quantum": q}, run_dir=run_dir(f"d2lpm-qw{q}"),
                    **sim)
        res["qw"].append({"quantum": q} | r)
        log(f"Q^w={q}: thr={r['throughput']:.0f} jain={_fmt(r['jain'])}")
    res["qw_baselines"] = {name: run_one(wl, pol, rt, d, seed, router_options=opts,
                                         run_dir=run_dir(name.replace("+", "-")), **sim)
                           for name, (pol, rt, opts) in SYSTEMS.items() if name != PAPER}
    return res


def plot_qw(res: dict, d: int, path: Path, title: str | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = res["qw_baselines"]
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
    ax.set_title(title or f"ToT S1, D={d}, KV pool {SIM['kv_pool_tokens']:,} tokens/worker (simulated)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
