"""What ``--dp 2`` buys on CPU: a flood on one server, one core, and two data-parallel workers.

The same flood against each system: ``--flood`` requests sharing one long
prefix (a unique tail each, ``--output`` new tokens), at most ``--connections``
in flight; beside it a light client sends short requests one at a time,
``--think`` seconds apart. Before the flood the light client measures its
idle latency alone on the same server.

Systems (all ``--policy dlpm``, the tiny CPU model, ``--max-running-requests
16``, each launched with ``python -m sglang_fair.launch_server`` as users do):

* ``one-server``: one server, every core of this process;
* ``one-core``: one server pinned to the first core (the unit of capacity);
* ``dp2``: ``--dp 2``, one core per rank as the launcher binds them;
* ``dp2-shared-cores``: ``--dp 2`` with both ranks given every core
  (``SGLANG_CPU_OMP_THREADS_BIND=0-1|0-1``), how SGLang runs ranks on a CPU
  without AMX when nothing binds them: the cost the binding removes.

Every server is started first (idle ones sleep), then the repetitions take
turns across systems in a rotating order, so drift in the machine's speed hits
every system alike. Printed per system (medians over repetitions): flood
makespan, output tokens/s, the light client's idle median, its P50 and P99
beside the flood and their slowdowns; then the targets, ratios within the
run: ``dp2``'s makespan <= 1.1x ``one-server``'s, and its output rate >= 1.8x
``one-core``'s. Below the table, each server's CPU time per flood output
token by process role (ranks, HTTP server and tokenizer, detokenizer,
data-parallel controller: ``sglang_fair.bench.process_cpu``) and the cores it
kept busy, so a slow system shows which process took the cores. Every
request must get exactly one answer.

    PYTHONPATH=. python benchmarks/experiments/dp_scaling.py [--reps 3] [--flood 400] [--connections 64] \\
        [--systems one-server one-core dp2] [--json F] [--plot F] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

from sglang_fair.bench.flood import (Rep, Shape, add_flood_options, check_line, p99, pooled,
                                     positive_int, run_flood, server_log_dir)
from sglang_fair.bench.process_cpu import ROLES, by_role, snapshot
from sglang_fair.binding.common.cpu_threads import BIND_ENV, format_cpu_list
from sglang_fair.testing.server import LocalServer

COMMON = ["--policy", "dlpm", "--max-running-requests", "16"]
CORES = sorted(os.sched_getaffinity(0))
# name -> (launcher arguments, cores the server may use (None: all), environment)
SYSTEMS: dict[str, tuple[list[str], list[int] | None, dict[str, str]]] = {
    "one-server": (COMMON, None, {}),
    "one-core": (COMMON, CORES[:1], {}),
    "dp2": ([*COMMON, "--dp", "2"], None, {}),
    "dp2-shared-cores": ([*COMMON, "--dp", "2"], None, {BIND_ENV: "|".join([format_cpu_list(CORES)] * 2)}),
}
TARGET_MAKESPAN = 1.1  # dp2 / one-server
TARGET_RATE = 1.8  # dp2 / one-core


def run_all(systems: list[str], shape: Shape, reps: int,
            log_dir: Path) -> tuple[dict[str, list[Rep]], dict[str, list[dict[str, float]]]]:
    """Each system's repetitions, and the CPU seconds its processes spent in each, by role, with the
    repetition's wall time (``wall_s``: the light tenant's idle measurement and the flood)."""
    results: dict[str, list[Rep]] = {name: [] for name in systems}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in systems}
    with contextlib.ExitStack() as stack:
        servers = {}
        for name in systems:
            args, cpus, env = SYSTEMS[name]
            log = log_dir / f"{name}.log"
            print(f"[{name}] starting (log: {log}) ...", file=sys.stderr, flush=True)
            servers[name] = stack.enter_context(LocalServer(module="sglang_fair.launch_server", extra_args=args,
                                                            cpus=cpus, env=env, log_path=log))
        for i in range(reps):
            for name in systems[i % len(systems):] + systems[:i % len(systems)]:
                before, start = snapshot(servers[name].pid), time.monotonic()
                rep = asyncio.run(run_flood(servers[name].base_url, shape, seed=i))
                cpu[name].append({**by_role(before, snapshot(servers[name].pid)), "wall_s": time.monotonic() - start})
                if rep.answered != rep.sent:
                    raise SystemExit(f"{name}: {rep.sent} requests sent, {rep.answered} answered")
                print(f"[{name}] rep {i + 1}/{reps}: makespan {rep.makespan_s:.1f} s, "
                      f"{rep.flood_tokens / rep.makespan_s:.0f} tok/s, light idle "
                      f"{statistics.median(pooled(rep.idle)) * 1e3:.0f} ms, beside the flood p99 "
                      f"{p99(pooled(rep.flooded)) * 1e3:.0f} ms", file=sys.stderr, flush=True)
                results[name].append(rep)
    return results, cpu


def summarize(results: dict[str, list[Rep]], cpu: dict[str, list[dict[str, float]]]) -> dict[str, dict]:
    table = {}
    for name, reps in results.items():
        # CPU per output token, not per second: a system that finishes sooner is not charged less
        per_token = {role: statistics.median(c[role] / r.flood_tokens * 1e3 for c, r in zip(cpu[name], reps))
                     for role in ROLES}
        idle = statistics.median(statistics.median(pooled(r.idle)) for r in reps)
        p50 = statistics.median(statistics.median(pooled(r.flooded)) for r in reps)
        tail = statistics.median(p99(pooled(r.flooded)) for r in reps)
        table[name] = {
            "makespan_s": statistics.median(r.makespan_s for r in reps),
            "output_tok_s": statistics.median(r.flood_tokens / r.makespan_s for r in reps),
            "light_idle_s": idle,
            "light_p50_s": p50,
            "light_p99_s": tail,
            "light_p50_slowdown": p50 / idle,
            "light_p99_slowdown": tail / idle,
            "requests": sum(r.answered for r in reps),
            "makespans_s": [r.makespan_s for r in reps],  # per repetition, in run order
            "cpu_ms_per_token": per_token,
            "cores_busy": statistics.median(sum(c[role] for role in ROLES) / c["wall_s"] for c in cpu[name]),
        }
    return table


def checks(table: dict[str, dict]) -> list[tuple[str, float, float, str]]:
    """(label, value, target, op) for each target whose systems ran."""
    out = []
    if {"dp2", "one-server"} <= table.keys():
        out.append(("dp2 flood makespan / one-server's", table["dp2"]["makespan_s"] / table["one-server"]["makespan_s"],
                    TARGET_MAKESPAN, "<="))
    if {"dp2", "one-core"} <= table.keys():
        out.append(("dp2 output rate / one-core's", table["dp2"]["output_tok_s"] / table["one-core"]["output_tok_s"],
                    TARGET_RATE, ">="))
    return out


def format_table(table: dict[str, dict], shape: Shape, reps: int) -> str:
    lines = [f"flood {shape.flood} x ({shape.prefix} shared + {shape.tail}) -> {shape.output} tokens through "
             f"{shape.connections} connections; light {shape.light_input} -> {shape.light_output}, "
             f"{shape.think_s:g} s apart; {' '.join(COMMON)}; medians of {reps} reps",
             f"{'system':<18}{'makespan':>10}{'tok/s':>8}{'idle ms':>9}{'p50 ms':>9}{'p99 ms':>9}"
             f"{'p50/idle':>10}{'p99/idle':>10}"]
    for name, row in table.items():
        lines.append(f"{name:<18}{row['makespan_s']:>9.1f}s{row['output_tok_s']:>8.0f}{row['light_idle_s'] * 1e3:>9.0f}"
                     f"{row['light_p50_s'] * 1e3:>9.0f}{row['light_p99_s'] * 1e3:>9.0f}"
                     f"{row['light_p50_slowdown']:>9.1f}x{row['light_p99_slowdown']:>9.1f}x")
    lines += ["", ("CPU ms per flood output token, by process (over the whole repetition: the light tenant's idle "
                   "requests, then the flood), and the cores busy on average"),
              f"{'system':<18}" + "".join(f"{role:>16}" for role in ROLES) + f"{'cores busy':>12}"]
    for name, row in table.items():
        lines.append(f"{name:<18}" + "".join(f"{row['cpu_ms_per_token'][role]:>16.2f}" for role in ROLES)
                     + f"{row['cores_busy']:>12.2f}")
    lines += [check_line(*check) for check in checks(table)]
    return "\n".join(lines)


def plot(table: dict[str, dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(table)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(names, [table[n]["output_tok_s"] for n in names], color="tab:blue")
    left.set_ylabel("output tokens/s during the flood (higher is better)")
    right.bar(names, [table[n]["light_p99_slowdown"] for n in names], color="tab:orange")
    right.set_yscale("log")
    right.set_ylabel("light client P99 beside the flood / idle (lower is better)")
    for ax in (left, right):
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle("One server, one core, --dp 2: a flood on the tiny CPU model")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flood_options(parser, list(SYSTEMS))
    parser.add_argument("--connections", type=positive_int, default=Shape.connections,
                        help="flood requests in flight at most")
    args = parser.parse_args(argv)
    shape = Shape(flood=args.flood, connections=args.connections, think_s=args.think)
    table = summarize(*run_all(args.systems, shape, args.reps, server_log_dir(args, "dp-scaling-")))
    print(format_table(table, shape, args.reps))
    if args.json:
        Path(args.json).write_text(json.dumps({"shape": asdict(shape), "server_args": COMMON, "reps": args.reps,
                                               "systems": table}, indent=2))
    if args.plot:
        plot(table, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
