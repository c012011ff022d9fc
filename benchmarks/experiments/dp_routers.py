"""Data-parallel routers side by side on the real SGLang server (``--dp 2``, tiny CPU model).

Each system is a local policy behind a router, launched as users launch it
(``python -m sglang_fair.launch_server --dp 2 ...``), and gets the same
workload (``configs/apps_dp.yaml``: a flooding client over four applications,
two light clients each reading its own document) replayed by the HTTP bench
into a run directory, which ``bench audit`` then holds against the system's
fairness bound. Systems take turns in a rotating order, ``--reps`` times, one
server at a time (two CPU workers need both cores), so drift in the machine's
speed hits every system alike.

Printed per system (medians over repetitions; the audit's worst repetition):
service throughput, cache hit rate, Jain's index, the light clients' share of
the service while everyone was active, the well-behaved clients' program
latency P50/P99, and the largest service gap between two clients both waiting
for admission (median), and the worst repetition's gap over the bound the
audit applies: a theorem where one covers the configuration (D²LPM's 5.1 for
``d2lpm``, Theorem G for ``d2lpm_global``), else the D²LPM-shaped reference,
which proves nothing either way. Then the checks of the default router (``d2lpm`` =
``d2lpm_global``) against Preble, the strongest non-fair peer, in the same run:
throughput >= 0.95x, well-behaved P99 <= Preble's, within its bound.

    PYTHONPATH=. python benchmarks/experiments/dp_routers.py [--reps 3] [--out runs/dp-routers] [--json F] [--plot F]
        [--systems preble d2lpm] [--add 'NAME=POLICY server arguments']
    PYTHONPATH=. python benchmarks/experiments/dp_routers.py --from-json F [--plot F]   # the table of a saved run, nothing run

Run directories (records, summary.json, the server's log) stay under
``--out``/<system>-r<rep>; ``python -m sglang_fair.bench audit DIR`` repeats
any audit row.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

from sglang_fair.bench.__main__ import main as bench_main
from sglang_fair.bench.audit import audit_fields
from sglang_fair.bench.output import read_records, read_summary

# name -> (policy, launcher arguments of its own)
SYSTEMS: dict[str, tuple[str, list[str]]] = {
    "rr+lpm": ("lpm", ["--load-balance-method", "round_robin"]),
    "preble": ("lpm", ["--load-balance-method", "preble"]),
    "vtc": ("vtc", ["--load-balance-method", "per_client_round_robin"]),
    "d2lpm-paper": ("dlpm", ["--load-balance-method", "d2lpm", "--fair-quantum", "256"]),
    "d2lpm": ("dlpm", ["--fair-quantum", "256"]),  # the launcher's default router under dlpm: d2lpm_global
}
DEFAULT = "d2lpm"
PEER = "preble"
# Every system: two workers, small batches and KV pools so that queues form and
# caches must choose on the tiny model; metrics on for admission times (audit).
SERVER_ARGS = ["--dp", "2", "--enable-metrics", "--max-running-requests", "4", "--max-total-tokens", "8192"]
WORKLOAD = ["--workload", "apps", "--scenario", "dp"]
TARGET_THROUGHPUT = 0.95  # default router's service throughput / Preble's


def run_system(name: str, run_dir: Path, seed: int) -> dict:
    """Launch ``name``'s server, replay the workload into ``run_dir``, audit it; one row."""
    policy, own = SYSTEMS[name]
    args = ["run", *WORKLOAD, "--seed", str(seed), "--policy", policy, "--launch",
            "--launch-args", shlex.join(SERVER_ARGS + own), "--out", str(run_dir), "--timeout", "900",
            "--no-progress"]
    code = bench_main(args)
    if code != 0:
        raise SystemExit(f"{name}: the run did not complete (exit {code}); see {run_dir}")
    summary = read_summary(run_dir)
    o = summary["overall"]
    light = [c for c, v in summary["clients"].items() if v["well_behaved"]]
    rates = {c: v["service_rate_all_active"] or 0.0 for c, v in summary["clients"].items()}
    row = {
        "run_dir": str(run_dir),
        "router": summary["run"]["params"].get("router"),
        "makespan_s": o["duration_s"],
        "throughput": o["throughput"]["service_per_s"],
        "hit_rate": o["cache_hit_rate"],
        "jain": o["jain_index"],
        # The light clients' part of the service delivered while every client was active.
        "light_share": sum(rates[c] for c in light) / sum(rates.values()) if sum(rates.values()) else None,
        "wb_p50": o["well_behaved_program_latency_s"]["p50"],
        "wb_p99": o["well_behaved_program_latency_s"]["p99"],
        "workers_per_client": _workers_per_client(run_dir),
    }
    return row | audit_fields(run_dir)


def _workers_per_client(run_dir: Path) -> dict[str, dict[int, int]]:
    """Requests each client sent to each worker (the records' ``worker``)."""
    out: dict[str, dict[int, int]] = {}
    for r in read_records(run_dir):
        if r.worker is not None:
            per = out.setdefault(r.client, {})
            per[r.worker] = per.get(r.worker, 0) + 1
    return out


def run_all(systems: list[str], reps: int, out: Path) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {name: [] for name in systems}
    t0 = time.perf_counter()
    for i in range(reps):
        for name in systems[i % len(systems):] + systems[: i % len(systems)]:
            row = run_system(name, out / f"{name.replace('+', '-')}-r{i + 1}", seed=i)
            rows[name].append(row)
            audit = (f"gap/bound {row['gap'] / row['bound']:.3f}" if "gap" in row
                     else f"audit failed: {row['audit_error']}")
            print(f"[{time.perf_counter() - t0:5.0f}s] rep {i + 1}/{reps} {name:<12} "
                  f"service/s {row['throughput']:8.0f}  hit {row['hit_rate']:.3f}  jain {_f(row['jain'])}  "
                  f"WB p99 {_f(row['wb_p99'])} s  {audit}", file=sys.stderr, flush=True)
    return rows


def _f(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(rows: dict[str, list[dict]]) -> dict[str, dict]:
    """Medians over repetitions (a machine shared with other jobs has slow spells); ratios to
    Preble's are taken per repetition, against the Preble run of the same repetition, then the median."""
    table = {}
    peer = rows.get(PEER)
    for name, reps in rows.items():
        audited = [r for r in reps if "gap" in r]
        worst = max(audited, key=lambda r: r["gap"] / r["bound"]) if audited else None
        table[name] = {key: _median([r.get(key) for r in reps]) for key in
                       ("makespan_s", "throughput", "hit_rate", "jain", "light_share", "wb_p50", "wb_p99", "gap")}
        if peer:
            table[name]["throughput_vs_peer"] = _median([r["throughput"] / p["throughput"] for r, p in zip(reps, peer)])
            table[name]["wb_p99_vs_peer"] = _median([r["wb_p99"] / p["wb_p99"] for r, p in zip(reps, peer)])
        table[name] |= {
            "router": reps[0]["router"],
            "reps": len(reps),
            "audit_ratio": worst["gap"] / worst["bound"] if worst else None,
            "audit_bound": worst["bound_name"] if worst else None,
            "audit_theorem": bool(worst and worst["theorem"]),
            "audit_within": all(r["within"] for r in audited) if len(audited) == len(reps) else None,
            "run_dirs": [r["run_dir"] for r in reps],
            "workers_per_client": [r["workers_per_client"] for r in reps],
        }
    return table


def checks(table: dict[str, dict]) -> list[tuple[str, bool]]:
    """The default router against Preble in the same run; empty when either is missing."""
    if DEFAULT not in table or PEER not in table:
        return []
    ours = table[DEFAULT]
    ratio, p99 = ours["throughput_vs_peer"], ours["wb_p99_vs_peer"]
    return [
        (f"{DEFAULT} throughput / {PEER}'s {ratio:.3f} vs target >= {TARGET_THROUGHPUT}", ratio >= TARGET_THROUGHPUT),
        (f"{DEFAULT} well-behaved P99 / {PEER}'s {p99:.3f} vs target <= 1", p99 <= 1.0),
        (f"{DEFAULT} within {ours['audit_bound']} in every repetition (worst gap/bound {_f(ours['audit_ratio'])})",
         bool(ours["audit_within"]) and ours["audit_theorem"]),
    ]


def format_table(table: dict[str, dict], reps: int) -> str:
    lines = [f"--dp 2, {' '.join(SERVER_ARGS[2:])}; workload {' '.join(WORKLOAD[1::2])} "
             f"(configs/apps_dp.yaml); {reps} rep(s): medians, ratios to {PEER} per repetition; audit: worst repetition",
             f"{'system':<18}{'router':<24}{'makespan':>9}{'service/s':>10}{'vs preble':>10}{'hit':>7}"
             f"{'jain':>7}{'light':>7}{'WB p50':>8}{'WB p99':>8}{'vs preble':>10}{'gap':>8}{'gap/bound':>11}  bound"]
    for name, row in table.items():
        lines.append(f"{name:<18}{row['router'] or '-':<24}{row['makespan_s']:>8.1f}s{row['throughput']:>10.0f}"
                     f"{_f(row.get('throughput_vs_peer')):>10}{row['hit_rate']:>7.3f}{_f(row['jain']):>7}"
                     f"{_f(row['light_share']):>7}{row['wb_p50']:>7.1f}s{row['wb_p99']:>7.1f}s"
                     f"{_f(row.get('wb_p99_vs_peer')):>10}{_f(row['gap'], '.0f'):>8}{_f(row['audit_ratio']):>11}"
                     f"  {row['audit_bound'] or '-'}")
    for label, ok in checks(table):
        lines.append(f"{label}: {'PASS' if ok else 'FAIL'}")
    return "\n".join(lines)


def plot(table: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(table)
    x = range(len(names))
    panels = [
        ("service throughput / Preble's (higher is better)", [t.get("throughput_vs_peer", 0.0) for t in table.values()]),
        ("cache hit rate (higher is better)", [t["hit_rate"] for t in table.values()]),
        ("well-behaved program P99, s (lower is better)", [t["wb_p99"] for t in table.values()]),
        ("audit: worst gap / bound (<= 1: within)", [t["audit_ratio"] or 0.0 for t in table.values()]),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.8))
    for ax, (title, values) in zip(axes, panels):
        ax.bar(x, values, 0.6, color=["tab:green" if n == DEFAULT else "tab:gray" for n in names])
        ax.set_xticks(list(x), names, rotation=30, ha="right")
        ax.set_title(title, fontsize=9)
    axes[3].axhline(1.0, color="tab:red", ls="--", lw=1)
    fig.suptitle("Routers on the real SGLang server, --dp 2 (tiny CPU model)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--add", action="append", default=[], metavar="NAME=POLICY [ARGS]",
                        help="one more system, e.g. 'd2lpm-r4=dlpm --fair-quantum 256 --fair-router-options "
                             "{\"local_queue_requests\": 4}'")
    parser.add_argument("--out", default="runs/dp-routers", help="run directories go here")
    parser.add_argument("--json", help="write the table as JSON here")
    parser.add_argument("--plot", help="write a PNG here")
    parser.add_argument("--from-json", help="print (and plot) the table of a run saved with --json; run nothing")
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        table = summarize(saved["rows"])
        print(format_table(table, saved["reps"]))
        if args.plot:
            plot(table, Path(args.plot))
        return 1 if any(not ok for _, ok in checks(table)) else 0
    if args.reps < 1:
        parser.error("--reps must be >= 1")
    systems = list(args.systems)
    for spec in args.add:
        name, sep, rest = spec.partition("=")
        words = shlex.split(rest)
        if not sep or not name or not words or name in SYSTEMS:
            parser.error(f"--add needs NAME=POLICY [server arguments] with a new name, got {spec!r}")
        SYSTEMS[name] = (words[0], words[1:])
        systems.append(name)
    rows = run_all(systems, args.reps, Path(args.out))
    table = summarize(rows)
    print(format_table(table, args.reps))
    if args.json:
        Path(args.json).write_text(json.dumps({"server_args": SERVER_ARGS, "workload": WORKLOAD, "reps": args.reps,
                                               "systems": table, "rows": rows}, indent=2))
    if args.plot:
        plot(table, Path(args.plot))
    return 1 if any(not ok for _, ok in checks(table)) else 0


if __name__ == "__main__":
    sys.exit(main())
