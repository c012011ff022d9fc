"""An open flood on a two-worker cluster, side by side with what an SGLang user already has.

One tenant floods (``--flood`` requests sharing a long text prefix, at most
``--connections`` in flight: several intensities, so that a load-balancing
gateway must spill), light tenants under their fair share send short requests
one at a time beside it (``--chain`` > 1: short chains of calls). Each light
tenant first measures its idle latency alone on the same cluster. Text
prompts, so the gateway's cache-aware rule sees the shared prefix.

Systems (two workers, each on one core of this machine, ``--max-running-requests 16``):

* ``d2lpm``: ``--policy dlpm --dp 2``, nothing else (the cluster-wide DLPM router,
  ``d2lpm_global``, and latency isolation, both on by default);
* ``d2lpm-no-isolation``: the same with ``--no-fair-isolation``; not run by default;
* ``d2lpm+lane``: the same as ``d2lpm`` with worker 1 a latency
  lane (router options ``lane_workers`` 1, ``lane_tokens`` ``--lane-tokens``,
  ``lane_hold_s`` ``--lane-hold-s`` when given): the flood holds at most that
  many tokens there, and the light tenants go there beside it
  (docs/latency_isolation.md); not run by default;
* ``preble``: ``--policy lpm --dp 2 --load-balance-method preble``;
* ``gie`` / ``dynamo``: the peers' routers (``--load-balance-method gie``: the
  Gateway API Inference Extension's flow control with VTC and its scorers;
  ``dynamo``: Dynamo's policy queue with weighted DRR and its KV cost;
  docs/router.md) in front of stock SGLang workers (its default policy, FCFS);
* ``smg``: ``smg`` 1.13 (the SGLang model gateway) with its defaults
  (``cache_aware``) in front of two single-worker LPM servers, each pinned to
  its core;
* ``smg+priority``: the same with its priority scheduler set up by an operator
  who knows who floods: the flooder held to the bulk class, the light tenants
  asking for interactive (four slots reserved for it), 32 requests in flight at
  most (the workers' batches; the rest queue in the gateway, whose queue is
  raised to 1,024 requests and 900 s so that it holds the whole flood);
* ``sglang-router`` / ``sglang-router+dlpm``: ``sglang-router`` 0.3.2 (the
  gateway's January release, ``cache_aware``) in front of two LPM / DLPM
  servers; not run by default: ``sglang-router-rr+dlpm`` (round-robin), and
  ``sglang-router+dlpm+isolation`` / ``sglang-router-rr+dlpm+isolation`` (DLPM
  servers with ``--fair-isolation``).
  A gateway not installed (``scripts/install_gateways.sh``) is skipped with a message.

Every server of a system is started when the system's turn comes and stopped
after it (a cluster needs both cores); systems take turns in a rotating order
over repetitions. Printed per intensity and system (medians over
repetitions): flood makespan, output tokens/s, cache hit rate, the light
tenants' idle median and their P50/P99 beside the flood as slowdowns, the
benchmark client's own largest event-loop lag beside the flood (``lag ms``:
the client shares the cores with the servers; when it, and the servers' own
front processes, go unscheduled, light requests are sent, placed and read
late, and a P99 near that lag measures the machine, not the admission order),
the fairness audit and the flood's split over the workers; then the targets,
ratios within the run. Each repetition on a cluster of ours (``--dp 2``) is
written as a run directory under the log folder and held against its bound
(``python -m sglang_fair.bench audit DIR`` repeats it); the audit column is the
worst repetition's largest service gap over its bound (``!``: a reference
bound with no theorem behind it, as for Preble). The last columns say what
work the makespan held: requests answered (the light tenants' closed loops
send more the faster they are served), every answer's output tokens per
second, and the flood requests SGLang retracted at least once.
``--from-json F`` prints the tables of a saved run again, running nothing.
Every request must get exactly one answer.

    PYTHONPATH=. python benchmarks/experiments/open_flood.py [--reps 3] [--connections 64 256] [--flood 400] \\
        [--systems d2lpm preble smg] [--chain 1] [--lane-tokens 2400] [--lane-hold-s S] \\
        [--server-args='...'] [--json F] [--plot F] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from sglang_fair.bench.flood import (FLOODER, Rep, Shape, add_flood_options, check_line, p99, pooled,
                                     positive_int, run_flood, server_log_dir)
from sglang_fair.bench.gateway import Gateway, gateway_missing, smg_priority_config
from sglang_fair.testing.server import LocalServer

# Every request streams (the audit needs each token's time). One event per token made the benchmark's own
# client, on the same two cores, the bottleneck: light P99 3.0-4.3 s against 0.43-0.48 s unstreamed on the
# same server. One event per 16 tokens: 0.72-0.81 s against 0.65-0.67 s.
SERVER = ["--max-running-requests", "16", "--enable-metrics", "--stream-interval", "16"]
@dataclass(frozen=True)
class System:
    """How to start one system: ``kind`` "dp" (one ``--dp 2`` server of ours) or a gateway's name."""

    kind: str
    launcher: tuple[str, ...]  # the server's (or each gateway worker's) launcher arguments
    gateway: tuple[str, ...] = ()  # the gateway's own arguments
    ours: bool = False  # d2lpm_global routes it: a theorem bounds its runs
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written for the gateway, "{name}" in its arguments
    expect_log: str | None = None  # what the gateway must log once ready


DP = ("--dp", "2")
LPM_SERVERS, DLPM_SERVERS = ("--policy", "lpm"), ("--policy", "dlpm")
# The flood's batches fill the workers (16 slots each): 32 in flight, the rest wait in the gateway, in a
# queue that holds 256 connections' worth for as long as a flood takes (its defaults: 100 requests, 60 s,
# then 429 / 408 to the flood).
SMG_PRIORITY = System("smg", LPM_SERVERS, ("--policy", "cache_aware", "--priority-scheduler-enabled",
                                           "--priority-scheduler-config", "{priority.yaml}",
                                           # tenants the file does not name may ask for interactive (its
                                           # default caps them at the default class)
                                           "--priority-scheduler-default-max-class", "interactive",
                                           "--trust-tenant-header",
                                           "--max-concurrent-requests", "32", "--queue-size", "1024",
                                           "--queue-timeout-secs", "900"),
                      files=(("priority.yaml", smg_priority_config([FLOODER], interactive_slots=4)),),
                      expect_log="priority scheduler enabled")
SYSTEMS: dict[str, System] = {
    "d2lpm": System("dp", ("--policy", "dlpm", *DP), ours=True),
    "d2lpm-no-isolation": System("dp", ("--policy", "dlpm", *DP, "--no-fair-isolation"), ours=True),
    "d2lpm+lane": System("dp", ("--policy", "dlpm", *DP), ours=True),
    "preble": System("dp", ("--policy", "lpm", *DP, "--load-balance-method", "preble")),
    "gie": System("dp", ("--policy", "fcfs", *DP, "--load-balance-method", "gie")),
    "dynamo": System("dp", ("--policy", "fcfs", *DP, "--load-balance-method", "dynamo")),
    "smg": System("smg", LPM_SERVERS, ("--policy", "cache_aware")),
    "smg+priority": SMG_PRIORITY,
    "sglang-router": System("sglang-router", LPM_SERVERS, ("--policy", "cache_aware")),
    "sglang-router+dlpm": System("sglang-router", DLPM_SERVERS, ("--policy", "cache_aware")),
    "sglang-router-rr+dlpm": System("sglang-router", DLPM_SERVERS, ("--policy", "round_robin")),
    "sglang-router+dlpm+isolation": System("sglang-router", (*DLPM_SERVERS, "--fair-isolation"),
                                           ("--policy", "cache_aware")),
    "sglang-router-rr+dlpm+isolation": System("sglang-router", (*DLPM_SERVERS, "--fair-isolation"),
                                              ("--policy", "round_robin")),
}
DEFAULT_SYSTEMS = ["d2lpm", "gie", "dynamo", "smg", "smg+priority", "sglang-router", "preble"]
# Four flood requests (512 + 16 prompt tokens, 64 new): a CPU decode step grows about linearly with the
# batch (8 ms alone, 85 ms at sixteen on the AMD machine), so a lane at four costs the flood little.
LANE_TOKENS = 2400
OURS = "d2lpm"  # --policy dlpm --dp 2 with nothing else: the headline system
TARGET_LIGHT_P99_VS_PREBLE = 0.1
# (system, ours' makespan / its makespan at most, at 64 / at 256 connections; ours' light P99 / its at most)
TARGETS = (("smg", {64: 0.9, 256: 1.0}, 0.2), ("smg+priority", {64: 1.0, 256: 1.0}, 1.0),
           ("gie", {64: 1.0, 256: 1.0}, 1.0), ("dynamo", {64: 1.0, 256: 1.0}, 1.0))


def ours(name: str) -> bool:
    """A cluster of ours (``--dp 2`` with ``d2lpm_global``): a theorem bounds its runs."""
    return SYSTEMS[name].ours


def launcher_args(name: str, lane_tokens: int, lane_hold_s: float | None = None) -> list[str]:
    """The launcher arguments of a ``--dp`` system, its lane's router options included."""
    args = list(SYSTEMS[name].launcher)
    if name.endswith("+lane"):
        options = {"lane_workers": 1, "lane_tokens": lane_tokens}
        if lane_hold_s is not None:
            options["lane_hold_s"] = lane_hold_s
        args += ["--fair-router-options", json.dumps(options)]
    return args


@contextlib.contextmanager
def cluster(name: str, log_dir: Path, server: list[str], lane_tokens: int = LANE_TOKENS,
            lane_hold_s: float | None = None):
    """The running system ``name``, every worker started with ``server``; yields its URL."""
    system = SYSTEMS[name]
    if system.kind == "dp":
        with LocalServer(module="sglang_fair.launch_server",
                         extra_args=[*launcher_args(name, lane_tokens, lane_hold_s), *server],
                         log_path=log_dir / f"{name}.log") as server:
            yield server.base_url
    else:
        with Gateway(2, [*system.launcher, *server], system.gateway, log_dir=log_dir / name, kind=system.kind,
                     files=dict(system.files), expect_log=system.expect_log) as gateway:
            yield gateway.base_url


def run_all(systems: list[str], shape: Shape, intensities: list[int], reps: int,
            log_dir: Path, server: list[str], lane_tokens: int = LANE_TOKENS,
            lane_hold_s: float | None = None) -> dict[int, dict[str, list[Rep]]]:
    results: dict[int, dict[str, list[Rep]]] = {c: {name: [] for name in systems} for c in intensities}
    for i in range(reps):
        for name in systems[i % len(systems):] + systems[:i % len(systems)]:
            print(f"[{name}] starting (logs under {log_dir}) ...", file=sys.stderr, flush=True)
            with cluster(name, log_dir, server, lane_tokens, lane_hold_s) as url:
                for connections in intensities:
                    # A cluster of ours reports its configuration: audit each repetition's run directory.
                    run_dir = log_dir / f"{name}-c{connections}-r{i + 1}" if SYSTEMS[name].kind == "dp" else None
                    rep = asyncio.run(run_flood(url, replace(shape, connections=connections), seed=i,
                                                run_dir=run_dir))
                    if rep.answered != rep.sent:
                        raise SystemExit(f"{name}: {rep.sent} requests sent, {rep.answered} answered")
                    print(f"[{name}] {connections} connections, rep {i + 1}/{reps}: makespan "
                          f"{rep.makespan_s:.1f} s, light p99 {p99(pooled(rep.flooded)) * 1e3:.0f} ms "
                          f"(idle median {statistics.median(pooled(rep.idle)) * 1e3:.0f} ms, client lag "
                          f"{rep.client_lag_max_s * 1e3:.0f} ms){_audit_note(rep)}",
                          file=sys.stderr, flush=True)
                    results[connections][name].append(rep)
    return results


def _audit_note(rep: Rep) -> str:
    if rep.audit is None:
        return ""
    if "audit_error" in rep.audit:
        return f"; audit failed: {rep.audit['audit_error']}"
    a = rep.audit
    return (f"; audit: gap {a['gap']:,.0f} vs {a['bound_name']} {a['bound']:,.0f} "
            f"({'within' if a['within'] else 'VIOLATED'}; {a['run_dir']})")


def _audit_summary(reps: list[Rep]) -> dict | None:
    """The worst repetition's gap / bound, and whether every repetition was audited and within its bound."""
    audits = [r.audit for r in reps if r.audit is not None]
    if not audits:
        return None
    done = [a for a in audits if "gap" in a]
    worst = max(done, key=lambda a: a["gap"] / a["bound"]) if done else None
    return {"ratio": worst["gap"] / worst["bound"] if worst else None,
            "bound": worst["bound_name"] if worst else None,
            "theorem": bool(worst and worst["theorem"]),
            "within": len(done) == len(reps) and all(a["within"] for a in done),
            "errors": [a["audit_error"] for a in audits if "audit_error" in a]}


def _slowdowns(rep: Rep) -> tuple[float, float]:
    """The light tenants' P50 and P99 beside the flood over their idle medians (each tenant its own)."""
    ratios = [x / statistics.median(rep.idle[c]) for c, values in rep.flooded.items() for x in values]
    return statistics.median(ratios), p99(ratios)


def summarize(results: dict[str, list[Rep]]) -> dict[str, dict]:
    table = {}
    for name, reps in results.items():
        slow = [_slowdowns(r) for r in reps]
        splits = [sorted(r.workers.get("flooder", {}).values(), reverse=True) for r in reps]
        table[name] = {
            "makespan_s": statistics.median(r.makespan_s for r in reps),
            "output_tok_s": statistics.median(r.flood_tokens / r.makespan_s for r in reps),
            "hit_rate": statistics.median(r.hit_rate for r in reps),
            "light_idle_s": statistics.median(statistics.median(pooled(r.idle)) for r in reps),
            "light_p50_s": statistics.median(statistics.median(pooled(r.flooded)) for r in reps),
            "light_p99_s": statistics.median(p99(pooled(r.flooded)) for r in reps),
            # The light requests' first token beside the flood (server-measured): the wait to be admitted,
            # and the prefill; what a light request spends beyond it is decoding in the flood's batch.
            "light_ttft_p99_s": (statistics.median(p99(pooled(r.first_token)) for r in reps)
                                 if all(r.first_token for r in reps) else None),
            "light_p50_slowdown": statistics.median(s[0] for s in slow),
            "light_p99_slowdown": statistics.median(s[1] for s in slow),
            "flood_split": splits[0] if splits and splits[0] else None,
            "requests": sum(r.answered for r in reps),
            # Work done within the makespan: the light tenants' closed loops send more requests the
            # faster they are served, and each takes running slots from the flood.
            "answered": statistics.median(r.answered for r in reps),
            "all_tok_s": statistics.median(r.output_tokens / r.makespan_s for r in reps),
            "retracted": statistics.median(r.retracted for r in reps),
            "client_lag_max_s": statistics.median(r.client_lag_max_s for r in reps),
            "audit": _audit_summary(reps),
        }
    return table


def checks(table: dict[str, dict], connections: int = 64) -> list[tuple[str, float, float, str]]:
    """(label, value, target, op) of each target whose systems ran, at ``connections`` flood connections."""
    out = []
    mine = [name for name in table if ours(name)]
    for name in mine:
        for peer, makespan, p99_ratio in TARGETS:
            if peer not in table:
                continue
            out.append((f"{name} makespan / {peer}'s", table[name]["makespan_s"] / table[peer]["makespan_s"],
                        makespan.get(connections, 1.0), "<="))
            out.append((f"{name} light P99 / {peer}'s", table[name]["light_p99_s"] / table[peer]["light_p99_s"],
                        p99_ratio, "<="))
        if "preble" in table:
            out.append((f"{name} light P99 / preble's", table[name]["light_p99_s"] / table["preble"]["light_p99_s"],
                        TARGET_LIGHT_P99_VS_PREBLE, "<="))
    for name, row in table.items():
        if ours(name):
            a = row["audit"]
            out.append((f"{name} runs within {a['bound'] if a and a['bound'] else 'their bound'} "
                        "(worst gap / bound)", a["ratio"] if a and a["within"] and a["theorem"] else float("inf"),
                        1.0, "<="))
    return out


def format_table(connections: int, table: dict[str, dict], shape: Shape, reps: int, server: list[str]) -> str:
    w = max(17, *(len(name) + 1 for name in table))
    lines = [f"flood {shape.flood} x ({shape.prefix} shared + {shape.tail}) -> {shape.output} tokens through "
             f"{connections} connections; {shape.light_tenants} light tenants {shape.light_input} -> "
             f"{shape.light_output} x{shape.chain}, {shape.think_s:g} s apart; {' '.join(server)}; medians of {reps}",
             f"{'system':<{w}}{'makespan':>10}{'tok/s':>7}{'hit':>6}{'idle ms':>9}{'p50 ms':>9}{'p99 ms':>9}"
             f"{'p50/idle':>10}{'p99/idle':>10}{'ttft p99':>10}{'lag ms':>8}{'audit':>7}{'answered':>9}"
             f"{'all tok/s':>10}{'retracted':>10}  flood split"]
    for name, row in table.items():
        lines.append(f"{name:<{w}}{row['makespan_s']:>9.1f}s{row['output_tok_s']:>7.0f}{row['hit_rate']:>6.2f}"
                     f"{row['light_idle_s'] * 1e3:>9.0f}{row['light_p50_s'] * 1e3:>9.0f}{row['light_p99_s'] * 1e3:>9.0f}"
                     f"{row['light_p50_slowdown']:>9.1f}x{row['light_p99_slowdown']:>9.1f}x"
                     f"{_ms(row['light_ttft_p99_s']):>10}{_ms(row['client_lag_max_s']):>8}"
                     f"{_audit_cell(row['audit']):>7}"
                     f"{row['answered']:>9.0f}{row['all_tok_s']:>10.0f}{row['retracted']:>10.0f}  "
                     f"{'/'.join(map(str, row['flood_split'])) if row['flood_split'] else '-'}")
    lines += [check_line(*check) for check in checks(table, connections)]
    return "\n".join(lines)


def _audit_cell(audit: dict | None) -> str:
    """The worst repetition's gap / bound; '!' marks a bound without a theorem behind it (Preble)."""
    if not audit or audit["ratio"] is None:
        return "-"
    return f"{audit['ratio']:.2f}{'' if audit['theorem'] else '!'}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.0f}"


def plot(tables: dict[int, dict[str, dict]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(max(5.5 * len(tables), 7.0), 4.4), squeeze=False)
    for ax, (connections, table) in zip(axes[0], tables.items()):
        for name, row in table.items():
            ax.scatter(row["makespan_s"], row["light_p99_slowdown"], s=60)
            ax.annotate(name, (row["makespan_s"], row["light_p99_slowdown"]), textcoords="offset points",
                        xytext=(5, 4), fontsize=8)
        ax.set_yscale("log")
        ax.set_xlabel("flood makespan, s (lower is better)")
        ax.set_ylabel("light tenants' P99 beside the flood / idle")
        ax.set_title(f"{connections} flood connections")
    fig.suptitle("Two workers, one flooding tenant:\nlight-tenant slowdown vs flood makespan", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def tables_of_saved_run(path: Path) -> str:
    """``format_table`` of every intensity of a run saved with ``--json``, summarized again from its repetitions."""
    saved = json.loads(Path(path).read_text())
    shape = Shape(**saved["shape"])
    tables = {int(c): summarize({name: [Rep(**rep) for rep in reps] for name, reps in by_system.items()})
              for c, by_system in saved["repetitions"].items()}
    return "\n\n".join(format_table(c, table, shape, saved["reps"], saved["server_args"])
                       for c, table in tables.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flood_options(parser, list(SYSTEMS), DEFAULT_SYSTEMS)
    parser.add_argument("--connections", type=positive_int, nargs="+", default=[64, 256],
                        help="flood intensities: requests in flight at most")
    parser.add_argument("--light-tenants", type=positive_int, default=2)
    parser.add_argument("--chain", type=positive_int, default=1, help="calls per light request (a short chain when > 1)")
    parser.add_argument("--lane-tokens", type=positive_int, default=LANE_TOKENS,
                        help="the lane systems' budget: tokens (prompt + maximum output) the flood may hold on the lane")
    parser.add_argument("--lane-hold-s", type=float, default=None,
                        help="the lane systems' lane_hold_s: how long a quiet light tenant keeps the flood to the "
                             "lane's budget (default: the router's)")
    parser.add_argument("--server-args", default="",
                        help="more launcher arguments for every worker of every system, as one word: --server-args='--chunked-prefill-size 512'")
    parser.add_argument("--from-json", type=Path, default=None, metavar="F",
                        help="print the tables of a run saved with --json again, and run nothing")
    args = parser.parse_args(argv)
    if args.from_json:
        print(tables_of_saved_run(args.from_json))
        return 0
    systems = list(args.systems)
    for kind in sorted({SYSTEMS[s].kind for s in systems} - {"dp"}):
        if missing := gateway_missing(kind):
            print(f"skipping the {kind} systems: {missing}", file=sys.stderr)
            systems = [s for s in systems if SYSTEMS[s].kind != kind]
    if not systems:
        parser.error("no system left to run")
    shape = Shape(flood=args.flood, light_tenants=args.light_tenants, chain=args.chain, think_s=args.think, text=True)
    server = SERVER + shlex.split(args.server_args)
    results = run_all(systems, shape, args.connections, args.reps, server_log_dir(args, "open-flood-"), server,
                      args.lane_tokens, args.lane_hold_s)
    tables = {c: summarize(by_system) for c, by_system in results.items()}
    print("\n\n".join(format_table(c, table, shape, args.reps, server) for c, table in tables.items()))
    if args.json:
        # Every repetition's latencies too, for looking at the requests behind a P99.
        raw = {c: {name: [asdict(rep) for rep in reps] for name, reps in by_system.items()}
               for c, by_system in results.items()}
        Path(args.json).write_text(json.dumps({"shape": asdict(shape), "server_args": server, "reps": args.reps,
                                               "lane_tokens": args.lane_tokens, "lane_hold_s": args.lane_hold_s,
                                               "tables": tables, "repetitions": raw}, indent=2))
    if args.plot:
        plot(tables, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
