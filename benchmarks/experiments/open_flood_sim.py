"""The open flood at paper scale in the simulator: one flooding tenant beside light tenants under their fair share.

For ToT, long-context QA and LLM-as-a-judge (the S1 scenarios' program
shapes at the DLPM paper's lengths), on D simulated H100s serving
Llama-3.1-8B (``--workers``, default 8): the scenario's misbehaving client
floods at ``--flood`` x the cluster's capacity, and each of its three
well-behaved clients offers ``--light`` of it, well under its fair share of
1/4. The capacity is LPM's saturated service rate per worker, as measured
for the paper grid (``sglang_fair/bench/paper_grid.py``), times D; every
client's Gamma rate is set so its offered service over ``--duration`` seconds
of arrivals matches.

Each system runs the whole traffic, then the light traffic alone (the same
programs, the same arrival times) on the same cluster; a light program's
slowdown is its latency beside the flood over its latency alone. Printed per
workload and system: the light programs' P50 / P99 slowdown, their P99
latency, throughput (service per second, the whole run) and the cache hit
rate, and the decode step a decoded token waited for on average (``step ms``:
beside the flood, and with the light traffic alone), which no admission
order shortens for a request already running; how each run ended; what the
placement cost (prompt tokens computed, programs whose calls ran on more
than one worker, the workers' mean idle time); then the targets, ratios
within the run.

Two more workloads are where the peers' cost models part from ours (configs/peers_*.yaml):
``output-heavy``, a flooder of short prompts and long outputs (counting prompt
size undercharges it), and ``cached-prefix``, a well-behaved tenant whose long
system prompt is cached after its first request and whose answers are short
(counting prompt size overcharges it: the *wronged* tenant, ``good-0``, whose
P99 is printed on its own). Their capacity is LPM's saturated service rate of
one worker with the flood alone (measured as for the grid, see
``CAPACITY_PER_WORKER``).

Systems: ``d2lpm`` (``--policy dlpm --dp D``: DLPM workers, the cluster-wide
DLPM router ``d2lpm_global``, latency isolation on, as by default),
``d2lpm-no-isolation`` (``--no-fair-isolation``), ``preble`` and ``cache_aware`` (SGLang gateway's rule),
both with LPM workers, and the peers' routers ``gie`` (flow control with VTC on
prompt size, then GIE's scorers) and ``dynamo`` (weighted DRR on uncached
tokens, then Dynamo's KV cost) in front of stock FCFS workers (docs/router.md).
The simulator is deterministic: one run each. Targets for ours: the light P50 /
P99 slowdowns, throughput at least every peer's, and the light (or wronged)
tenant's P99 at most half the best peer's.

``--chunked-prefill-size`` and ``--enable-mixed-chunk`` set SGLang's options of
the same names on every worker of every system. A mixed prefill carries one
decode step of the running batch, so a running request is not held up by a
run of long prefills; the simulator times it as the prefill plus that decode
step less its fixed cost (an estimate: the profile holds no mixed step).
With mixed chunks, ``d2lpm_global`` learns the chunk size, as on the server
(rule 7 of docs/router.md). ``--router-option KEY=JSON`` sets one of its
options for the d2lpm systems, e.g. ``worker_chunk_tokens=null`` to compare
without that rule.

``--lanes K[xTOKENS] ...`` adds one system per value: ``d2lpm`` with K
latency lanes (``lane_workers`` = K, ``lane_tokens`` = TOKENS, by default
the router's; rule 8 of docs/router.md), the trade of throughput for short
decode steps measured beside the other systems. ``--plot F`` draws each
system's light P50 and P99 slowdown against its throughput over Preble's.

With ``--grid docs/sim-trends/grid.json`` it instead reads the paper grid and
prints, per cell, how much its well-behaved clients gain over Preble at P50,
what they offer against their fair share, and how long they wait.

    PYTHONPATH=. python benchmarks/experiments/open_flood_sim.py [--workloads tot qa judge] [--workers 8] [--json F]
        [--chunked-prefill-size 2048] [--enable-mixed-chunk] [--router-option worker_chunk_tokens=8192]
        [--lanes 1 2x16384] [--plot F]
    PYTHONPATH=. python benchmarks/experiments/open_flood_sim.py --grid docs/sim-trends/grid.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from dataclasses import replace

from sglang_fair.bench.flood import check_line, p99
from sglang_fair.bench.paper_grid import PAPER_SCALE, SIM, offered_service, paper_workload
from sglang_fair.metrics.backlog import merge_spans
from sglang_fair.metrics.latency import program_latencies
from sglang_fair.metrics.summary import summarize
from sglang_fair.router import make_router
from sglang_fair.router.lanes import DEFAULT_LANE_TOKENS
from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Workload
from sglang_fair.workloads.registry import build_workload
from sglang_fair.workloads.spec import CONFIG_DIR, load_scenario, scenario_path

# Service per second one simulated H100 delivers under LPM when saturated, as measured for the paper
# grid's LOAD (sglang_fair/bench/paper_grid.py).
# grid (sglang_fair/bench/paper_grid.py); the peers' scenarios: one worker, LPM, the flood alone at 40
# requests/s for 30 s (38,453 and 32,630 service/s on 2026-12-04).
CAPACITY_PER_WORKER = {("tot", "s1"): 67_000, ("tot", "s2"): 72_000, ("qa", "s1"): 98_000,
                       ("qa", "s2"): 92_000, ("judge", "s1"): 44_000, ("judge", "s2"): 30_000,
                       ("output-heavy", "s1"): 38_000, ("cached-prefix", "s1"): 33_000}
WORKLOADS = ("tot", "qa", "judge", "output-heavy", "cached-prefix")
# The peers' scenarios: workload -> its file; the tenant their cost model wrongs, when it is not every light one.
PEER_SCENARIOS = {"output-heavy": "peers_output_heavy.yaml", "cached-prefix": "peers_cached_prefix.yaml"}
WRONGED = {"cached-prefix": "good-0"}
# The wronged tenant of cached-prefix offers half the cluster's capacity counted as prompt + output (what a
# prompt-size counter sees), a few percent of it counted as the work it causes (its prompt is cached).
WRONGED_OFFER = {("cached-prefix", "good-0"): 0.5}
PEERS = ("preble", "cache_aware", "gie", "dynamo")
FLOODER = "bad"
# name -> (local policy, router, simulator options)
SYSTEMS = {
    "d2lpm": ("dlpm", "d2lpm_global", {}),
    "d2lpm-no-isolation": ("dlpm", "d2lpm_global", {"isolation": False}),
    "preble": ("lpm", "preble", {}),
    "cache_aware": ("lpm", "cache_aware", {}),
    "gie": ("fcfs", "gie", {}),
    "dynamo": ("fcfs", "dynamo", {}),
}
TARGET_P50, TARGET_P99 = 1.5, 3.0
TARGET_P99_VS_BEST_PEER = 0.5
FILL_S = 5.0  # the workers' batches fill with the flood's first prompts within about this long


def flood_workload(workload: str, workers: int, flood: float, light: float, duration: float, seed: int) -> Workload:
    """The S1 scenario with the flooder offering ``flood`` x capacity and each light client ``light`` x capacity."""
    capacity = CAPACITY_PER_WORKER[(workload, "s1")] * workers
    if workload in PEER_SCENARIOS:
        sc = load_scenario(CONFIG_DIR / PEER_SCENARIOS[workload], {}, seed)
    else:
        sc = load_scenario(scenario_path(workload, "s1"), PAPER_SCALE[workload], seed)
    # Service per program of each client, from a first build at the scenario's own rates.
    probe = build_workload(replace(sc, clients=[replace(c, num_programs=20) for c in sc.clients]))
    per_program = {client: service / 20 for client, service in offered_by_client(probe).items()}
    clients = []
    for c in sc.clients:
        share = flood if c.name == FLOODER else WRONGED_OFFER.get((workload, c.name), light)
        rate = share * capacity / per_program[c.name]
        clients.append(replace(c, rate=rate, num_programs=max(1, round(rate * duration))))
    wl = build_workload(replace(sc, clients=clients))
    wl.name = f"{workload}-flood-D{workers}"
    wl.meta["flood_workload"] = workload
    return wl


def offered_by_client(wl: Workload) -> dict[str, float]:
    """Each client's offered service over the whole workload (paper_grid.offered_service's measure)."""
    return {c: offered_service(Workload(c, [p for p in wl.programs if p.client == c])) for c in wl.clients}


def lane_system(spec: str) -> tuple[str, tuple[str, str, dict]]:
    """``K`` or ``KxTOKENS`` -> (name, system): d2lpm with K latency lanes; ValueError if malformed."""
    lanes, _, tokens = spec.partition("x")
    try:
        k, t = int(lanes), int(tokens) if tokens else DEFAULT_LANE_TOKENS
    except ValueError:
        raise ValueError(f"--lanes takes K or KxTOKENS (e.g. 2 or 2x16384), got {spec!r}") from None
    options = {"router_options": {"lane_workers": k, "lane_tokens": t}}
    return f"d2lpm+lanes {k}x{t}", ("dlpm", "d2lpm_global", options)


def run_system(name: str, wl: Workload, workers: int, seed: int, engine: dict | None = None,
               router_options: dict | None = None, system: tuple[str, str, dict] | None = None) -> dict:
    """``engine``: SGLang settings every worker of every system gets (``chunked_prefill_size``,
    ``enable_mixed_chunk``); ``router_options``: options of our router (``d2lpm_global``) only;
    ``system``: (policy, router, simulator options) when ``name`` is not one of ``SYSTEMS``."""
    policy, router, options = system or SYSTEMS[name]
    if router == "d2lpm_global" and router_options:
        options = options | {"router_options": options.get("router_options", {}) | dict(router_options)}

    def simulate(workload: Workload):
        backend = SimBackend(policy=policy, seed=seed, num_workers=workers, router=router,
                             **(SIM | (engine or {}) | options))
        result = backend.run(workload, progress=False)
        if result.partial:
            raise SystemExit(f"{name} on {workload.name}: run incomplete: {result.errors[:3]}")
        return result

    light_only = Workload(wl.name + "-light", [p for p in wl.programs if p.client != FLOODER])
    full, alone = simulate(wl), simulate(light_only)
    (beside, _), (idle, _) = program_latencies(full.records), program_latencies(alone.records)
    light = [pid for pid in idle if pid in beside]
    if len(light) != len(light_only.programs):
        raise SystemExit(f"{name} on {wl.name}: {len(light_only.programs) - len(light)} light programs unanswered")
    slowdowns = [beside[pid] / idle[pid] for pid in light]
    overall = summarize(full.records, well_behaved={c: c != FLOODER for c in wl.clients})["overall"]
    client_of = {p.program_id: p.client for p in wl.programs}
    wronged_client = WRONGED.get(wl.meta.get("flood_workload"))
    wronged = [beside[pid] for pid in light if client_of[pid] == wronged_client]
    wronged_calls = [r for r in full.records if r.client == wronged_client and r.ok]
    return {"wronged_p99_s": p99(wronged) if wronged else None,
            "wronged_tail": tail_phases(wronged_calls),
            "wronged_p99_after_fill_s": p99_or_none([r.t_done - r.t_sent for r in wronged_calls if r.t_sent >= FILL_S]),
            "decode_step_ms": _token_step_ms(full), "decode_step_ms_alone": _token_step_ms(alone),
            "light_p50_slowdown": statistics.median(slowdowns), "light_p99_slowdown": p99(slowdowns),
            "light_p99_s": p99([beside[pid] for pid in light]), "light_idle_p50_s": statistics.median(idle.values()),
            "throughput": overall["throughput"]["service_per_s"], "hit_rate": overall["cache_hit_rate"],
            "light_programs": len(light), "preemptions": sum(w["preemptions"] for w in full.meta["workers"]),
            "drain": drain(full), "placement": placement(full)}


def drain(result) -> dict[str, float]:
    """How the run ended: its makespan (what service/s divides by) after the last admission, the
    workers' last completions, the requests running at the last admission (all, and on the fullest
    worker), and the tokens prefilled again after a retraction or preemption."""
    done = [r for r in result.records if r.ok and r.t_admitted is not None]
    last_admission = max(r.t_admitted for r in done)
    last_done: dict[int, float] = {}
    running: dict[int, int] = {}
    for r in done:
        last_done[r.worker] = max(last_done.get(r.worker, 0.0), r.t_done)
        if r.t_admitted <= last_admission < r.t_done:
            running[r.worker] = running.get(r.worker, 0) + 1
    return {"end_s": max(last_done.values()), "last_admission_s": last_admission,
            "first_worker_done_s": min(last_done.values()), "running": sum(running.values()),
            "running_max": max(running.values(), default=0),
            "recomputed_tokens": sum(w["recomputed_tokens"] for w in result.meta["workers"])}


def placement(result) -> dict[str, float]:
    """What the placement cost: the prompt tokens the workers computed (prompt less cached), the
    programs of several calls whose calls ran on more than one worker (each such worker computes
    their shared prefix), and the workers' mean idle time from the run's start to its end (no request
    admitted and unfinished there): a router that holds requests can leave a worker idle."""
    done = [r for r in result.records if r.ok and r.t_admitted is not None]
    end = max(r.t_done for r in done)
    workers_of: dict[str, set[int]] = {}
    busy: dict[int, list[tuple[float, float]]] = {}
    for r in done:
        workers_of.setdefault(r.program_id, set()).add(r.worker)
        busy.setdefault(r.worker, []).append((r.t_admitted, r.t_done))
    calls = Counter(r.program_id for r in result.records)
    idle = [end - sum(stop - start for start, stop in merge_spans(busy.get(w, [])))
            for w in range(len(result.meta["workers"]))]
    return {"computed_prompt_tokens": sum(r.prompt_tokens - (r.cached_tokens or 0) for r in done),
            "programs_on_several_workers": sum(1 for ws in workers_of.values() if len(ws) > 1),
            "multi_call_programs": sum(1 for n in calls.values() if n > 1),
            "worker_idle_s": statistics.mean(idle)}


def p99_or_none(values: list[float]) -> float | None:
    return p99(values) if values else None


def tail_phases(records: list) -> dict[str, float] | None:
    """Where the slowest 2% of these calls spent their time, in the mean: when they were sent
    (s into the run), their wait for admission, admission to first token, and decoding."""
    done = sorted((r for r in records if r.t_admitted is not None and r.t_first_token is not None),
                  key=lambda r: r.t_sent - r.t_done)
    if not done:
        return None
    tail = done[: max(1, len(done) // 50)]
    return {"sent_s": statistics.mean(r.t_sent for r in tail),
            "admission_s": statistics.mean(r.t_admitted - r.t_sent for r in tail),
            "first_token_s": statistics.mean(r.t_first_token - r.t_admitted for r in tail),
            "decode_s": statistics.mean(r.t_done - r.t_first_token for r in tail)}


def _token_step_ms(result) -> float:
    """The decode step a decoded token waited for, on average over every worker's tokens, ms."""
    workers = result.meta["workers"]
    return sum(w["decode_token_ms"] for w in workers) / max(1, sum(w["decode_tokens"] for w in workers))


def checks(table: dict[str, dict]) -> list[tuple[str, float, float, str]]:
    out = []
    peers = [peer for peer in PEERS if peer in table]
    for name, row in table.items():
        if not name.startswith("d2lpm"):
            continue
        out += [(f"{name} light P50 slowdown", row["light_p50_slowdown"], TARGET_P50, "<="),
                (f"{name} light P99 slowdown", row["light_p99_slowdown"], TARGET_P99, "<=")]
        out += [(f"{name} throughput / {peer}'s", row["throughput"] / table[peer]["throughput"], 1.0, ">=")
                for peer in peers]
        key = "wronged_p99_s" if row.get("wronged_p99_s") is not None else "light_p99_s"
        if peers:
            best = min(peers, key=lambda p: table[p][key])
            who = "wronged tenant's" if key == "wronged_p99_s" else "light"
            out.append((f"{name} {who} P99 / the best peer's ({best})", row[key] / table[best][key],
                        TARGET_P99_VS_BEST_PEER, "<="))
    return out


def format_table(title: str, table: dict[str, dict]) -> str:
    width = max(17, *(len(name) + 1 for name in table))
    wronged = any(row.get("wronged_p99_s") is not None for row in table.values())
    lines = [title, f"{'system':<{width}}{'p50/idle':>10}{'p99/idle':>10}{'p99 s':>9}"
                    + (f"{'wronged p99 s':>15}" if wronged else "") + f"{'idle p50 s':>12}"
                    f"{'service/s':>11}{'hit':>6}{'preempt':>9}{'step ms':>9}{'alone':>7}"]
    for name, row in table.items():
        lines.append(f"{name:<{width}}{row['light_p50_slowdown']:>9.2f}x{row['light_p99_slowdown']:>9.2f}x"
                     f"{row['light_p99_s']:>9.2f}" + (f"{row['wronged_p99_s'] or 0:>15.2f}" if wronged else "")
                     + f"{row['light_idle_p50_s']:>12.2f}{row['throughput']:>11.0f}"
                     f"{row['hit_rate']:>6.2f}{row['preemptions']:>9}{row['decode_step_ms']:>9.1f}"
                     f"{row['decode_step_ms_alone']:>7.1f}")
    for name, row in table.items():
        tail = row.get("wronged_tail")
        if tail:
            lines.append(f"{name}: the wronged tenant's slowest 2% of calls, sent {tail['sent_s']:.1f} s into the run, "
                         f"waited {tail['admission_s']:.2f} s for admission, {tail['first_token_s']:.2f} s for "
                         f"their first token and decoded for {tail['decode_s']:.2f} s (means)"
                         + ("" if row["wronged_p99_after_fill_s"] is None else
                            f"; the P99 of its calls sent after the first {FILL_S:g} s: "
                            f"{row['wronged_p99_after_fill_s']:.2f} s"))
    for name, row in table.items():
        d = row.get("drain")
        if d:
            after = d["end_s"] - d["last_admission_s"]
            lines.append(f"{name}: ends at {d['end_s']:.1f} s, {after:.1f} s after its last "
                         f"admission (the first worker done at {d['first_worker_done_s']:.1f} s); "
                         f"{d['running']} running then, {d['running_max']} on the fullest worker; "
                         f"{d['recomputed_tokens']:,} tokens prefilled again")
    for name, row in table.items():
        pl = row.get("placement")
        if pl:
            lines.append(f"{name}: computed {pl['computed_prompt_tokens']:,} prompt tokens; "
                         f"{pl['programs_on_several_workers']} of {pl['multi_call_programs']} programs of several "
                         f"calls ran on more than one worker; workers idle {pl['worker_idle_s']:.2f} s on average")
    lines += [check_line(*check) for check in checks(table)]
    return "\n".join(lines)


def plot(tables: dict[str, dict[str, dict]], path: str, title: str) -> None:
    """Per workload: each system's light P50 (filled) and P99 (hollow) slowdown against its
    throughput over Preble's in the same run; the shaded corner is where the P50 and throughput targets hold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(5.2 * len(tables), 4.6), squeeze=False)
    for ax, (workload, table) in zip(axes[0], tables.items()):
        base = table["preble"]["throughput"]
        top = max(row["light_p99_slowdown"] for row in table.values()) * 1.1
        ax.fill_between([1.0, 2.0], 1.0, TARGET_P50, color="tab:green", alpha=0.12, label="P50 and throughput targets")
        for i, (name, row) in enumerate(table.items()):
            x = row["throughput"] / base
            color = system_color(i)
            ax.plot([x, x], [row["light_p50_slowdown"], row["light_p99_slowdown"]], color=color, lw=1, alpha=0.5)
            ax.scatter([x], [row["light_p50_slowdown"]], color=color, s=45, label=name)
            ax.scatter([x], [row["light_p99_slowdown"]], facecolors="none", edgecolors=color, s=45)
        xs = [row["throughput"] / base for row in table.values()]
        ax.set_xlim(min(xs) - 0.03, max(max(xs), 1.0) + 0.03)
        ax.set_ylim(1.0, top)
        ax.axhline(TARGET_P99, color="grey", ls=":", lw=1)
        ax.set_xlabel("throughput / Preble's (higher is better)")
        ax.set_ylabel("light program latency beside the flood / alone")
        ax.set_title(workload)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title + "\nfilled: light P50, hollow: light P99; dotted: the P99 target", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")


def system_color(i: int) -> tuple[float, float, float, float]:
    """The i-th system's colour: tab10 repeats after ten (a lane sweep has more), so then tab20's light
    shades, from grey on, so that none is a shade of the first three systems' (the baselines') colours."""
    from matplotlib import colormaps

    return colormaps["tab10"](i) if i < 10 else colormaps["tab20"](2 * ((i + 7) % 10) + 1)


def grid_shares(grid: dict) -> list[dict]:
    """Per cell of the paper grid (sim_trends.py's grid.json, D > 1, its own pool): how much the
    well-behaved clients gain over Preble at P50, how much they offer against their fair share,
    and how long they wait for admission."""
    rows = {(r["workload"], r["scenario"], r["D"], r["system"]): r for r in grid["rows"]
            if r["kv_pool_tokens"] == grid["kv_pool_tokens"]}
    out = []
    for (workload, scenario), capacity in CAPACITY_PER_WORKER.items():
        for d in sorted({k[2] for k in rows if k[:2] == (workload, scenario) and k[2] > 1}):
            ours, preble = rows.get((workload, scenario, d, "d2lpm")), rows.get((workload, scenario, d, "preble"))
            if not ours or not preble:
                continue
            wl = paper_workload(workload, scenario, d, seed=0, duration=grid["duration_s"])
            by_client = offered_by_client(wl)
            good = [c for c, ok in wl.well_behaved_clients().items() if ok]
            offered = [by_client[c] / grid["duration_s"] / (capacity * d) for c in good]
            out.append({"cell": f"{workload} {scenario.upper()} D={d}", "p50_gain": preble["wb_p50"] / ours["wb_p50"],
                        "good_offered_share": statistics.mean(offered), "fair_share": 1 / len(wl.clients),
                        "good_waiting": ours["wb_waiting"]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--flood", type=float, default=2.0, help="the flooder's offered service / the cluster's capacity")
    parser.add_argument("--light", type=float, default=0.05, help="each light client's offered service / capacity")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunked-prefill-size", type=int, default=8192,
                        help="every worker's SGLang --chunked-prefill-size (default %(default)s)")
    parser.add_argument("--enable-mixed-chunk", action="store_true",
                        help="every worker runs SGLang's --enable-mixed-chunk: a prefill also decodes the running batch")
    parser.add_argument("--router-option", action="append", default=[], metavar="KEY=JSON",
                        help="an option of d2lpm_global for the d2lpm systems, e.g. worker_chunk_tokens=8192 "
                        "(repeatable; docs/router.md lists them)")
    parser.add_argument("--lanes", nargs="+", default=[], metavar="K[xTOKENS]",
                        help="also run d2lpm with K latency lanes of TOKENS each "
                        f"(router lane_workers / lane_tokens, default {DEFAULT_LANE_TOKENS}), e.g. 2 2x16384")
    parser.add_argument("--json", help="write the tables as JSON here")
    parser.add_argument("--plot", help="draw the light slowdowns against throughput / Preble's here (PNG)")
    parser.add_argument("--grid", help="instead: the paper grid's grid.json (sim_trends.py), read for how much its "
                        "well-behaved clients offer against their fair share")
    args = parser.parse_args(argv)
    if args.grid:
        with open(args.grid) as f:
            shares = grid_shares(json.load(f))
        print(f"{'cell':<16}{'P50 preble/d2lpm':>18}{'offered/capacity':>18}{'fair share':>12}{'waiting':>9}")
        for r in shares:
            waiting = "-" if r["good_waiting"] is None else f"{r['good_waiting']:.2f}"
            print(f"{r['cell']:<16}{r['p50_gain']:>17.2f}x{r['good_offered_share']:>18.3f}{r['fair_share']:>12.3f}"
                  f"{waiting:>9}")
        return 0
    if not (args.flood > 0 and 0 < args.light < 0.25 and args.duration > 0 and args.workers >= 1):
        parser.error("need --flood > 0, 0 < --light < 0.25 (under a fair share of 1/4), --duration > 0, --workers >= 1")
    if args.chunked_prefill_size < 1:
        parser.error(f"--chunked-prefill-size must be a positive number of tokens, got {args.chunked_prefill_size}")
    engine = {"chunked_prefill_size": args.chunked_prefill_size, "enable_mixed_chunk": args.enable_mixed_chunk}
    router_options = {}
    for item in args.router_option:
        key, sep, value = item.partition("=")
        try:
            router_options[key] = json.loads(value)
        except json.JSONDecodeError:
            sep = ""
        if not sep or not key:
            parser.error(f"--router-option takes KEY=JSON (e.g. worker_chunk_tokens=8192), got {item!r}")
    if router_options:
        try:
            make_router("d2lpm_global", args.workers, **router_options)
        except (TypeError, ValueError) as exc:
            parser.error(f"--router-option: {exc}")
    if args.plot and "preble" not in args.systems:
        parser.error("--plot needs preble among --systems (throughput is drawn as a ratio to Preble's)")
    systems = {name: SYSTEMS[name] for name in args.systems}
    for spec in args.lanes:
        try:
            name, system = lane_system(spec)
            make_router("d2lpm_global", args.workers, **system[2]["router_options"])
        except ValueError as exc:
            parser.error(f"--lanes: {exc}")
        systems[name] = system
    settings = f"chunked prefill {args.chunked_prefill_size}" + (", mixed chunk" if args.enable_mixed_chunk else "")
    settings += "".join(f", router {key}={json.dumps(value)}" for key, value in router_options.items())
    tables = {}
    for workload in args.workloads:
        wl = flood_workload(workload, args.workers, args.flood, args.light, args.duration, args.seed)
        table = {}
        for name, system in systems.items():
            print(f"[{workload}] {name} ...", file=sys.stderr, flush=True)
            table[name] = run_system(name, wl, args.workers, args.seed, engine, router_options, system)
        tables[workload] = table
        title = (f"{workload}: D = {args.workers}, flood {args.flood:g}x capacity, 3 light clients {args.light:g}x "
                 f"each, {args.duration:g} s of arrivals ({len(wl.programs)} programs); {settings}")
        print(format_table(title, table) + "\n", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "tables": tables}, f, indent=1)
    if args.plot:
        plot(tables, args.plot, f"D = {args.workers}, flood {args.flood:g}x capacity, {args.duration:g} s; {settings}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
