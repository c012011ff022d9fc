"""Latency isolation on the real CPU server: an interactive client beside a flood.

One tiny CPU server per system (lpm, vtc, dlpm, dlpm and vtc with
``--fair-isolation``), all started first, the same traffic against each in
turn (a rotating order), ``--reps`` times:

* idle: the light client sends short requests one at a time on the idle server;
* flood: the flooder submits ``--flood`` requests at once (one long shared
  prefix, a unique tail each); once the server is saturated the light client
  again sends short requests one at a time, ``--think`` seconds apart (an
  interactive user; with 0 it asks as fast as it is answered and, served
  fast, stops being light), until the flood is answered.

Prints per system the light client's mean and p99 latency idle and under the
flood, their ratio, the flood's makespan and the total output throughput as
ratios to plain dlpm measured in the same run, the requests preempted
(SGLang's per-request retraction count) and the tokens recomputed (the
server's ``sglang_fair_client_recomputed_tokens_total``). Every request must get
exactly one answer. Targets (isolation): light latency under flood <= 3x
idle; flood makespan <= 1.1x and throughput >= 0.95x plain dlpm's.

    PYTHONPATH=. python benchmarks/experiments/latency_isolation.py [--reps 3] [--slots 16] [--think 0.5] [--flood 400] \
        [--json out.json] [--plot out.png] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sglang_fair.bench.flood import Rep, Shape, add_flood_options, check_line, p99, pooled, positive_int, run_flood, server_log_dir
from sglang_fair.testing.server import LocalServer

SYSTEMS = {  # name -> server arguments
    "lpm": ["--policy", "lpm"],
    "vtc": ["--policy", "vtc"],
    "dlpm": ["--policy", "dlpm"],
    "vtc+isolation": ["--policy", "vtc", "--fair-isolation"],
    "dlpm+isolation": ["--policy", "dlpm", "--fair-isolation"],
}
BASELINE = "dlpm"
SERVER_ARGS = ["--enable-metrics"]
DEFAULT_SLOTS = 16  # --max-running-requests
TARGET_LATENCY_RATIO, TARGET_MAKESPAN, TARGET_THROUGHPUT = 3.0, 1.1, 0.95


@dataclass
class IsolationRep:
    """One repetition: the flood's measures, and the tokens the server recomputed after preemptions."""

    flood: Rep
    recomputed: float

    @property
    def idle(self) -> list[float]:
        return pooled(self.flood.idle)

    @property
    def flooded(self) -> list[float]:
        return pooled(self.flood.flooded)


def _recomputed(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sum(float(m.group(1)) for m in re.finditer(r"^sglang_fair_client_recomputed_tokens_total\{[^}]*\} (\S+)$", text, re.M))


def run_all(systems: list[str], shape: Shape, reps: int, slots: int, log_dir: Path) -> dict[str, list[IsolationRep]]:
    """Every system's server up at once (idle ones sleep), the repetitions taking
    turns across systems in a rotating order, so drift in the machine's speed
    hits all systems alike."""
    results: dict[str, list[IsolationRep]] = {name: [] for name in systems}
    with contextlib.ExitStack() as stack:
        servers = {}
        for name in systems:
            log = log_dir / f"{name}.log"
            print(f"[{name}] starting the tiny CPU server (log: {log}) ...", file=sys.stderr, flush=True)
            args = [*SYSTEMS[name], *SERVER_ARGS, "--max-running-requests", str(slots)]
            servers[name] = stack.enter_context(LocalServer(module="sglang_fair.launch_server", extra_args=args,
                                                            log_path=log))
        for i in range(reps):
            for name in systems[i % len(systems):] + systems[: i % len(systems)]:
                url = servers[name].base_url
                before = _recomputed(url)
                flood = asyncio.run(run_flood(url, shape, seed=i))
                time.sleep(1.5)  # per-client gauges refresh once a second
                rep = IsolationRep(flood, _recomputed(url) - before)
                if flood.answered != flood.sent:
                    raise SystemExit(f"{name}: {flood.sent} requests sent, {flood.answered} answered")
                print(f"[{name}] rep {i + 1}/{reps}: light idle {statistics.mean(rep.idle) * 1e3:.0f} ms, "
                      f"flooded {statistics.mean(rep.flooded) * 1e3:.0f} ms ({len(rep.flooded)} requests), "
                      f"makespan {flood.makespan_s:.1f} s", file=sys.stderr, flush=True)
                results[name].append(rep)
    return results


def _plain(name: str) -> str:
    """The system ``name`` is compared with: the same policy without isolation."""
    return name.split("+")[0]


def summarize(results: dict[str, list[IsolationRep]]) -> dict[str, dict]:
    makespans = {name: statistics.mean(r.flood.makespan_s for r in reps) for name, reps in results.items()}
    throughputs = {name: statistics.mean(r.flood.output_tokens / r.flood.makespan_s for r in reps)
                   for name, reps in results.items()}
    table = {}
    for name, reps in results.items():
        idle = [x for r in reps for x in r.idle]
        flooded = [x for r in reps for x in r.flooded]
        makespan, throughput = makespans[name], throughputs[name]
        plain = _plain(name) if _plain(name) in results else name
        table[name] = {
            "light_idle_mean_s": statistics.mean(idle),
            "light_flood_mean_s": statistics.mean(flooded),
            "light_flood_p99_s": p99(flooded),
            "latency_ratio": statistics.mean(flooded) / statistics.mean(idle),
            "light_requests_under_flood": len(flooded),
            "makespan_s": makespan,
            "makespan_vs_dlpm": makespan / makespans[BASELINE],
            "makespan_vs_plain": makespan / makespans[plain],
            "throughput_tok_s": throughput,
            "throughput_vs_dlpm": throughput / throughputs[BASELINE],
            "throughput_vs_plain": throughput / throughputs[plain],
            "preempted_requests": statistics.mean(r.flood.retracted for r in reps),
            "recomputed_tokens": statistics.mean(r.recomputed for r in reps),
        }
    return table


def format_table(table: dict[str, dict], shape: Shape, reps: int, slots: int) -> str:
    lines = [f"flood {shape.flood} x ({shape.prefix} shared + {shape.tail}) -> {shape.output} tokens; "
             f"light {shape.light_input} -> {shape.light_output}, {shape.think_s:g} s apart; "
             f"server --max-running-requests {slots} "
             f"{' '.join(SERVER_ARGS)}; {reps} reps",
             f"{'system':<16}{'idle ms':>9}{'flood ms':>10}{'p99 ms':>10}{'ratio':>9}{'makespan':>10}{'vs dlpm':>9}"
             f"{'tok/s':>8}{'vs dlpm':>9}{'preempted':>11}{'recomputed':>12}"]
    for name, row in table.items():
        lines.append(f"{name:<16}{row['light_idle_mean_s'] * 1e3:>9.0f}{row['light_flood_mean_s'] * 1e3:>10.0f}"
                     f"{row['light_flood_p99_s'] * 1e3:>10.0f}{row['latency_ratio']:>8.1f}x{row['makespan_s']:>9.1f}s"
                     f"{row['makespan_vs_dlpm']:>8.2f}x{row['throughput_tok_s']:>8.0f}{row['throughput_vs_dlpm']:>8.2f}x"
                     f"{row['preempted_requests']:>11.1f}{row['recomputed_tokens']:>12.0f}")
    for name, row in table.items():
        if name == _plain(name):
            continue
        plain = _plain(name)
        checks = [("light latency under flood / idle", row["latency_ratio"], TARGET_LATENCY_RATIO, "<="),
                  (f"flood makespan / {plain}'s", row["makespan_vs_plain"], TARGET_MAKESPAN, "<="),
                  (f"throughput / {plain}'s", row["throughput_vs_plain"], TARGET_THROUGHPUT, ">=")]
        lines += [check_line(f"{name}: {label}", value, target, op) for label, value, target, op in checks]
    return "\n".join(lines)


def plot(table: dict[str, dict], path: str, slots: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(table)
    x = list(range(len(names)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.bar(x, [table[n]["latency_ratio"] for n in names], 0.6, color="tab:orange")
    left.set_yscale("log")
    left.axhline(TARGET_LATENCY_RATIO, color="tab:green", ls="--", label=f"target {TARGET_LATENCY_RATIO:g}x")
    left.set_xticks(x, names, rotation=20)
    left.set_ylabel("light latency beside the flood / idle (lower is better)")
    left.legend()
    right.bar([i - 0.2 for i in x], [table[n]["makespan_vs_dlpm"] for n in names], 0.4,
              label=f"flood makespan (target <= {TARGET_MAKESPAN:g} with isolation)")
    right.bar([i + 0.2 for i in x], [table[n]["throughput_vs_dlpm"] for n in names], 0.4,
              label=f"output throughput (target >= {TARGET_THROUGHPUT:g})")
    right.axhline(1.0, color="grey", lw=0.8)
    right.set_xticks(x, names, rotation=20)
    right.set_ylabel("ratio to plain dlpm (same run)")
    right.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"Latency isolation on the real SGLang server (tiny CPU model, {slots} running slots)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flood_options(parser, list(SYSTEMS))
    parser.add_argument("--slots", type=positive_int, default=DEFAULT_SLOTS, help="the servers' --max-running-requests")
    args = parser.parse_args(argv)
    if BASELINE not in args.systems:
        parser.error(f"--systems must include {BASELINE} (the ratios' baseline)")
    # Every flood request sent at once (one connection each): the server's queue, not the client's, holds them.
    shape = Shape(flood=args.flood, connections=args.flood, think_s=args.think)
    results = run_all(args.systems, shape, args.reps, args.slots, server_log_dir(args, "latency-isolation-"))
    table = summarize(results)
    print(format_table(table, shape, args.reps, args.slots))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": vars(shape), "server_args": [*SERVER_ARGS, "--max-running-requests", args.slots],
                       "reps": args.reps, "systems": table}, f, indent=2)
    if args.plot:
        plot(table, args.plot, args.slots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
