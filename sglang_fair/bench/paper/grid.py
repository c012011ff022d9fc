"""The DLPM paper's evaluation grid (Fig. 7) pieces shared by ``bench paper dlpm --figure 7`` and
``benchmarks/experiments/sim_trends.py``: which systems run at D workers, the relative-throughput plot."""

from __future__ import annotations

import math
from pathlib import Path

from sglang_fair.bench.paper_grid import BASELINE, DEFAULT, PAPER, PEER, SYSTEMS


def systems_at(d: int) -> list[tuple[str, tuple[str, str, dict]]]:
    """D = 1: one row per local policy, named after it (no router; Preble is multi-GPU only)."""
    if d > 1:
        return [(n, s) for n, s in SYSTEMS.items() if n != "fcfs"]  # FCFS behind round-robin ~ rr+lpm
    seen, out = set(), []
    for name, (policy, router, _) in SYSTEMS.items():
        if router == "preble" or policy in seen:
            continue
        seen.add(policy)
        out.append((policy, (policy, "round_robin", {})))
    return out


def plot_relative(rows: list[dict], pool: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {(r["workload"], r["scenario"], r["D"], r["system"]): r for r in rows if r["kv_pool_tokens"] == pool}
    keys = [(w, sc, d) for (w, sc, d, s) in by if s == PEER]
    if not keys:
        return
    names = (DEFAULT, PAPER, BASELINE)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(keys)), 3.8))
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        ys = [by[(*key, name)]["throughput"] / by[(*key, PEER)]["throughput"] if (*key, name) in by else math.nan
              for key in keys]
        ax.bar([i + (k - 1) * width for i in range(len(keys))], ys, width, label=name)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(0.95, color="k", lw=0.8, ls=":", label="0.95 x preble")
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{w} {sc}\nD={d}" for w, sc, d in keys], fontsize=7)
    ax.set_ylabel("throughput / preble's")
    ax.set_title(f"Simulated H100s, Llama-3.1-8B, KV pool {pool:,} tokens/worker", fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
