"""The DLPM paper's grid (§6.2) on the simulator, ours with its defaults beside today's fairness peers.

Every (workload, scenario, D) cell of ``benchmarks/experiments/sim_trends.py`` at D > 1 (the
same arrivals, simulated H100s serving Llama-3.1-8B, the KV pool SGLang gives one)
runs these systems:

* ``d2lpm``: ``--policy dlpm --dp D`` with nothing else: DLPM workers behind the
  cluster-wide DLPM router ``d2lpm_global``, latency isolation on (the default);
* ``d2lpm-no-isolation``: the same with ``--no-fair-isolation``, to price the default;
* ``gie``: the Gateway API Inference Extension's flow control (VTC on prompt size,
  dispatch below its saturation, its queue / KV / prefix scorers) in front of FCFS workers;
* ``dynamo``: Dynamo's policy queue (weighted DRR on uncached tokens, dispatch while
  a worker is not busy, its KV-overlap cost) in front of FCFS workers;
* ``preble``: Preble in front of LPM workers, the strongest peer of the paper's grid.

docs/router.md names the peers' sources and every simplification. Each run is written
to a run directory and audited (``bench audit``): the largest service gap between two
backlogged clients, against Theorem G for ours and the D²LPM-shaped reference for the
peers (which proves nothing for them; it is printed so the gaps can be compared).

Targets, cell by cell: ``d2lpm``'s throughput >= 1.0x ``gie``'s and ``dynamo``'s and >= 1.2x
``gie``'s (every workload here shares prefixes); the default's isolation costs <= 2%
(``d2lpm`` >= 0.98x ``d2lpm-no-isolation``); ``d2lpm`` within Theorem G.

    PYTHONPATH=. python benchmarks/experiments/peers_sim.py [--workloads tot,qa,judge] [--workers 2,4,8]
        [--systems d2lpm gie ...] [--duration 30] [--seed 0] [--json F] [--markdown F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from sglang_fair.bench.paper_grid import DURATION_S, SIM, paper_workload, run_one

# name -> (local policy, router, simulator options of the workers)
SYSTEMS: dict[str, tuple[str, str, dict]] = {
    "d2lpm": ("dlpm", "d2lpm_global", {}),
    "d2lpm-no-isolation": ("dlpm", "d2lpm_global", {"isolation": False}),
    "gie": ("fcfs", "gie", {}),
    "dynamo": ("fcfs", "dynamo", {}),
    "preble": ("lpm", "preble", {}),
}
OURS = "d2lpm"
# (label, peer, ours' throughput / the peer's at least)
TARGETS = (("vs gie", "gie", 1.2), ("vs dynamo", "dynamo", 1.0), ("isolation cost", "d2lpm-no-isolation", 0.98))


def run_cell(workload: str, scenario: str, d: int, systems: list[str], duration: float, runs_dir: Path,
             seed: int = 0) -> dict[str, dict]:
    wl = paper_workload(workload, scenario, d, seed, duration)
    rows = {}
    for name in systems:
        policy, router, fair = SYSTEMS[name]
        rows[name] = run_one(wl, policy, router, d, seed, fair=dict(fair),
                             run_dir=runs_dir / f"{workload}-{scenario}-D{d}-{name}")
    return rows


def checks(cell: dict[str, dict]) -> list[tuple[str, float, float, bool]]:
    """(label, value, target, passed) for one cell's targets whose systems ran."""
    if OURS not in cell:
        return []
    mine, out = cell[OURS], []
    for label, peer, want in TARGETS:
        if peer in cell and cell[peer]["throughput"]:
            ratio = mine["throughput"] / cell[peer]["throughput"]
            out.append((label, ratio, want, ratio >= want))
    if "gap" in mine:
        ratio = mine["gap"] / mine["bound"]
        out.append(("gap / Theorem G", ratio, 1.0, bool(mine["within"]) and bool(mine["theorem"])))
    else:
        out.append(("gap / Theorem G", float("inf"), 1.0, False))
    return out


def _gap(r: dict) -> str:
    return "-" if "gap" not in r else f"{r['gap'] / r['bound']:.3f}{'' if r['theorem'] else ' ref'}"


def _f(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(table: dict[str, dict[str, dict]]) -> str:
    systems = list(next(iter(table.values())))
    lines = ["| cell | " + " | ".join(f"{s} throughput" for s in systems) + " | "
             + " | ".join(f"{label} (>= {want})" for label, _, want in TARGETS) + " | "
             + " | ".join(f"{s} gap / bound" for s in systems) + " | "
             + " | ".join(f"{s} WB P99 (s)" for s in systems) + " |",
             "|---" * (1 + 3 * len(systems) + len(TARGETS)) + "|"]
    for cell, rows in table.items():
        got = {label: (value, ok) for label, value, _, ok in checks(rows)}
        ratios = [f"{got[label][0]:.3f} {'PASS' if got[label][1] else 'MISS'}" if label in got else "-"
                  for label, _, _ in TARGETS]
        lines.append(f"| {cell} | " + " | ".join(f"{rows[s]['throughput']:,.0f}" for s in systems) + " | "
                     + " | ".join(ratios) + " | " + " | ".join(_gap(rows[s]) for s in systems) + " | "
                     + " | ".join(_f(rows[s]["wb_p99"], ".1f") for s in systems) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="tot,qa,judge", type=lambda s: s.split(","))
    ap.add_argument("--scenarios", default="s1,s2", type=lambda s: s.split(","))
    ap.add_argument("--workers", default="2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--duration", type=float, default=DURATION_S, help="seconds of arrivals per run")
    ap.add_argument("--seed", type=int, default=0, help="the arrivals' seed (every system gets the same arrivals)")
    ap.add_argument("--runs-dir", type=Path, default=None, help="where the run directories go (default: temporary)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    args = ap.parse_args(argv)
    if any(d < 2 for d in args.workers):
        ap.error("--workers: every D must be at least 2 (the peers are routers)")
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="peers-sim-"))
    print(f"H100 profile, KV pool {SIM['kv_pool_tokens']:,} tokens per worker, {args.duration:g} s of arrivals, "
          f"seed {args.seed}; "
          f"runs under {runs_dir}", flush=True)
    table: dict[str, dict[str, dict]] = {}
    t0, failed = time.perf_counter(), 0
    for w in args.workloads:
        for sc in args.scenarios:
            for d in args.workers:
                cell = f"{w} {sc} D={d}"
                rows = run_cell(w, sc, d, args.systems, args.duration, runs_dir, args.seed)
                table[cell] = rows
                print(f"[{time.perf_counter() - t0:5.0f}s] {cell}: "
                      + ", ".join(f"{s} {r['throughput']:,.0f} (gap {_gap(r)})" for s, r in rows.items()), flush=True)
                for label, value, want, ok in checks(rows):
                    failed += not ok
                    print(f"    {label}: {value:.3f} (target {'<=' if 'gap' in label else '>='} {want}) "
                          f"{'PASS' if ok else 'MISS'}", flush=True)
    text = markdown(table)
    print(text)
    print(f"{failed} target(s) missed", flush=True)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        slim = {cell: {s: {k: v for k, v in r.items() if k != "records"} for s, r in rows.items()}
                for cell, rows in table.items()}
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "tables": slim},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
