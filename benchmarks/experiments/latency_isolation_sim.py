"""Latency isolation in the simulator (a simulated H100 serving Llama-3.1-8B).

Three settings, each run with vtc and dlpm, with and without ``isolation``:

* ``flood+chat``: the real-server benchmark's traffic (benchmarks/experiments/latency_isolation.py)
  at GPU speed: 400 flood requests (512 shared + 16 own tokens -> 64) fill
  every slot, a light client chats 12 short turns (32 -> 16), one at a time;
  its idle latency is measured alone on the same worker. With 16 and 64 slots.
* ``tot-s1``: the DLPM paper's ToT S1 at paper scale (benchmarks/experiments/sim_trends.py's
  arrivals and KV pool), D = 1; the default 1,024 slots and 64.
* ``chat-s1``: configs/chat_s1.yaml with arrivals 10x faster, 8 slots.

Prints the light (well-behaved) clients' mean and P99 request latency, the
makespan as a ratio to the same policy without isolation, and the
preemptions and recomputed tokens. The simulator is deterministic: one run each.

    PYTHONPATH=. python benchmarks/experiments/latency_isolation_sim.py [--json out.json] [--settings "flood+chat, 16 slots" ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys

from sglang_fair.bench.paper_grid import SIM, paper_workload
from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Call, Program, Workload
from sglang_fair.workloads.registry import make_workload

POLICIES = ("vtc", "dlpm")


def flood_and_chat(flood: int = 400, turns: int = 12, with_flood: bool = True) -> Workload:
    """A flood of shared-prefix requests at t=0, and a light client's chat of short independent turns."""
    rng = random.Random(0)
    prefix = tuple(rng.randrange(30000) for _ in range(512))
    programs = []
    if with_flood:
        calls = tuple(Call(prefix + tuple(rng.randrange(30000) for _ in range(16)), 64) for _ in range(flood))
        programs.append(Program("flooder/0", "flooder", 0.0, calls, well_behaved=False))
    chat = tuple(Call(tuple(rng.randrange(30000) for _ in range(32)), 16, parents=(i - 1,) if i else ())
                 for i in range(turns))
    programs.append(Program("light/0", "light", 0.05, chat))
    return Workload("flood-and-chat", programs)


def _settings() -> dict[str, tuple[Workload, dict, Workload | None]]:
    """name -> (workload, simulator options, the light clients' idle workload or None)."""
    tot = paper_workload("tot", "s1", 1, seed=0)
    chat = make_workload("chat", "s1")
    chat.programs = [dataclasses.replace(p, arrival=p.arrival / 10) for p in chat.programs]
    idle = flood_and_chat(with_flood=False)
    return {
        "flood+chat, 16 slots": (flood_and_chat(), {"max_running_requests": 16}, idle),
        "flood+chat, 64 slots": (flood_and_chat(), {"max_running_requests": 64}, idle),
        "tot-s1 paper, 1024 slots": (tot, dict(SIM), None),
        "tot-s1 paper, 64 slots": (tot, dict(SIM, max_running_requests=64), None),
        "chat-s1 x10, 8 slots": (chat, {"max_running_requests": 8}, None),
    }


def _latencies(result) -> list[float]:
    return sorted(r.t_done - r.t_sent for r in result.records if r.well_behaved and r.ok)


def run_setting(workload: Workload, options: dict, idle: Workload | None) -> dict:
    rows = {}
    idle_mean = None
    if idle is not None:
        idle_mean = statistics.mean(_latencies(SimBackend(policy="dlpm", **options).run(idle, progress=False)))
    for policy in POLICIES:
        plain_makespan = None
        for isolation in (False, True):
            result = SimBackend(policy=policy, isolation=isolation, **options).run(workload, progress=False)
            if result.partial:
                raise SystemExit(f"{policy}: run incomplete: {result.errors[:3]}")
            lat = _latencies(result)
            makespan = result.meta["sim_time_s"]
            plain_makespan = plain_makespan or makespan
            workers = result.meta["workers"]
            rows[policy + ("+isolation" if isolation else "")] = {
                "mean_s": statistics.mean(lat), "p99_s": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
                "vs_idle": statistics.mean(lat) / idle_mean if idle_mean else None,
                "makespan_s": makespan, "makespan_vs_plain": makespan / plain_makespan,
                "preemptions": sum(w["preemptions"] for w in workers),
                "recomputed_tokens": sum(w["recomputed_tokens"] for w in workers),
            }
    return {"idle_mean_s": idle_mean, "systems": rows}


def format_table(results: dict[str, dict]) -> str:
    lines = [f"{'setting':<26}{'system':<16}{'mean s':>8}{'p99 s':>8}{'vs idle':>9}{'makespan':>10}"
             f"{'vs plain':>9}{'preempt':>9}{'recomputed':>11}"]
    for setting, res in results.items():
        for name, row in res["systems"].items():
            vs_idle = f"{row['vs_idle']:.2f}x" if row["vs_idle"] else "-"
            lines.append(f"{setting:<26}{name:<16}{row['mean_s']:>8.3f}{row['p99_s']:>8.3f}{vs_idle:>9}"
                         f"{row['makespan_s']:>9.1f}s{row['makespan_vs_plain']:>8.3f}x{row['preemptions']:>9}"
                         f"{row['recomputed_tokens']:>11}")
        if res["idle_mean_s"]:
            lines.append(f"{setting:<26}{'(idle)':<16}{res['idle_mean_s']:>8.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--settings", nargs="+", metavar="NAME", help="run only these settings (default: all)")
    args = parser.parse_args(argv)
    settings = _settings()
    unknown = sorted(set(args.settings or ()) - set(settings))
    if unknown:
        parser.error(f"--settings: unknown {unknown}; choose from {sorted(settings)}")
    results = {}
    for name, (workload, options, idle) in settings.items():
        if args.settings and name not in args.settings:
            continue
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name] = run_setting(workload, options, idle)
    print("well-behaved (light) clients' request latency; makespan vs the same policy without isolation")
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
