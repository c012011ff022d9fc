"""One cell of the simulator grid under router variants: where does the default router lose?

Runs one (workload, scenario, D) cell of ``benchmarks/experiments/sim_trends.py`` (same
arrivals, KV pool and simulator settings) for each seed and each named
variant, and prints throughput (and its ratio to Preble's), cache hit rate,
Jain's index and the well-behaved clients' P99 program latency.

``--why-held`` also observes ``d2lpm_global`` (its ``observer``: each arrival,
placement and placement round, with why each request still waits; the
run's records give the admissions) and reports, in shares of all prompt tokens:

* ``at arrival``: what the router's index held of each prompt, on any worker,
  when the request arrived; ``at admission``: what the worker really found
  cached when it admitted the request;
* ``lost held`` / ``lost local``: prefix the index held at arrival but the
  chosen worker no longer had when the router placed the request / when the
  worker admitted it (requests losing >= 256 tokens);
* how long the requests that lost prefix while held were held, by reason,
  sampled after every placement pass: ``no room`` (every local queue full),
  ``deficit`` (rooms free, the client's counter not positive), ``passed
  over`` (rooms free, counter positive: the locality or shared-prefill wait).

``--per-client`` prints, under each run, every client's service rate inside
the all-active interval (the one Jain's index is taken over), the share of
that interval it had a request waiting for admission, its mean request
latency and when its last request finished, and Jain's index over the
arrival window instead: Jain over the all-active interval ends where the
first client finishes, which one late request can move.

    PYTHONPATH=. python benchmarks/experiments/sim_variants.py --cell judge-s2-4 --seeds 0,3 --why-held
    PYTHONPATH=. python benchmarks/experiments/sim_variants.py --cell qa-s1-8 --kv-pool 60000 --variants preble,d2lpm,no-fairness
    PYTHONPATH=. python benchmarks/experiments/sim_variants.py --cell judge-s2-4 --variants preble,d2lpm \
        --add 'queue-8192={"local_queue_tokens": 8192}'
    PYTHONPATH=. python benchmarks/experiments/sim_variants.py --cell qa-s2-4 --variants d2lpm --per-client \
        --add 'queue-8192={"local_queue_tokens": 8192}'
    PYTHONPATH=. python benchmarks/experiments/sim_variants.py --cell tot-s2-4 --variants vtc,preble,d2lpm --profile h100-sdpa-llama-3.1-8b
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import statistics

from sglang_fair.bench.paper_grid import DURATION_S, SIM, paper_workload, run_one
from sglang_fair.metrics.backlog import backlog_spans
from sglang_fair.metrics.fairness import (
    all_active_interval,
    jain_index,
    service_rates_in,
)
from sglang_fair.metrics.service import ServiceWeights, by_client
from sglang_fair.runs.records import RequestRecord
from sglang_fair.sim.costmodel import ProfileError, load_profile

_UNBOUNDED = {"local_queue_tokens": 1 << 40, "local_queue_requests": 1 << 30}
_NO_FAIRNESS = {"quantum": 1e12}  # a refill so large no client's counter ever runs out
VARIANTS: dict[str, tuple[str, str, dict, str]] = {
    "vtc": ("vtc", "per_client_round_robin", {}, "VTC workers, clients spread round-robin (the paper's baseline)"),
    "preble": ("lpm", "preble", {}, "LPM workers behind the Preble-style router"),
    "d2lpm": ("dlpm", "d2lpm_global", {}, "the default router (cluster-wide DLPM, late binding)"),
    "d2lpm-paper": ("dlpm", "d2lpm", {}, "Algorithm 2 of the DLPM paper"),
    "unbounded": ("dlpm", "d2lpm_global", _UNBOUNDED, "the default router, local queues without bound"),
    "no-fairness": ("dlpm", "d2lpm_global", _NO_FAIRNESS, "the default router, quantum 1e12"),
    "no-fairness-unbounded": ("dlpm", "d2lpm_global", _NO_FAIRNESS | _UNBOUNDED, "both of the above"),
}
LOST_MIN_TOKENS = 256


class HoldProbe:
    """What ``d2lpm_global`` knew of each request and why it held it (``--why-held``): the
    router's observer (``GlobalDLPMRouter.observer``), then the run's records for admissions."""

    def __init__(self) -> None:
        self.requests: dict[str, dict] = {}
        self._since: dict[str, tuple[str, float]] = {}  # rid -> (reason held, since)

    def routed(self, rid: str, client: str, tokens: int, cached_anywhere: int, t: float) -> None:
        self.requests[rid] = {"client": client, "tokens": tokens, "arrival": cached_anywhere, "t_arrival": t,
                              "held": collections.Counter()}

    def dispatched(self, rid: str, worker: int, cached_there: int, t: float) -> None:
        info = self.requests.get(rid)
        if info is not None:
            info["placed"], info["t_placed"] = cached_there, t

    def pumped(self, held: dict[str, str], t: float) -> None:
        for rid, why in held.items():
            current = self._since.get(rid)
            if current is None or current[0] != why:
                self._close(rid, t)
                self._since[rid] = (why, t)
        for rid in [r for r in self._since if r not in held]:
            self._close(rid, t)

    def admitted(self, records: list[RequestRecord]) -> None:
        """Each request's cached tokens and time at admission, from the run's records."""
        for record in records:
            info = self.requests.get(record.rid)
            if info is not None and record.t_admitted is not None:
                info["admitted"], info["t_admitted"] = record.cached_tokens or 0, record.t_admitted

    def _close(self, rid: str, now: float) -> None:
        current = self._since.pop(rid, None)
        if current is not None:
            self.requests[rid]["held"][current[0]] += now - current[1]

    def report(self) -> list[str]:
        done = [r for r in self.requests.values() if "admitted" in r]
        if not done:
            return ["  no request admitted"]
        tokens = sum(r["tokens"] for r in done)
        placed = [r for r in done if "placed" in r]
        lost_held = [r for r in placed if r["arrival"] - r["placed"] >= LOST_MIN_TOKENS]
        lost_local = [r for r in placed if r["placed"] - r["admitted"] >= LOST_MIN_TOKENS]
        reasons: collections.Counter = collections.Counter()
        for r in lost_held:
            reasons.update(r["held"])
        held_s = [r["t_placed"] - r["t_arrival"] for r in placed]
        lost_s = [r["t_placed"] - r["t_arrival"] for r in lost_held]

        def share(rs: list[dict], a: str, b: str) -> float:
            return sum(r[a] - r[b] for r in rs) / tokens

        return [
            f"  prompt tokens cached at arrival (index, any worker) {sum(r['arrival'] for r in done) / tokens:.3f}, "
            f"at admission {sum(r['admitted'] for r in done) / tokens:.3f}; lost held {share(lost_held, 'arrival', 'placed'):.3f} "
            f"({len(lost_held)} requests), lost local {share(lost_local, 'placed', 'admitted'):.3f} ({len(lost_local)})",
            f"  held in the router: median {_median(held_s):.2f} s, mean {_mean(held_s):.2f} s; the requests that "
            f"lost prefix while held: median {_median(lost_s):.2f} s, by reason (s): "
            + ", ".join(f"{k} {reasons[k]:.0f}" for k in ("no room", "deficit", "passed over")),
        ]


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def _mean(xs: list[float]) -> float:
    return statistics.mean(xs) if xs else 0.0


def client_lines(records: list[RequestRecord], arrivals_s: float) -> list[str]:
    """Per client: service rate and waiting share in the all-active interval, mean latency,
    last finish; then Jain's index over the all-active interval and over ``[0, arrivals_s]``."""
    weights = ServiceWeights()
    interval = all_active_interval(records)
    if interval is None:
        return ["      no interval in which every client is active"]
    start, end = interval
    rates = service_rates_in(records, interval, weights)
    lines = [f"      {'client':<12}{'rate/s':>9}{'waiting':>9}{'mean lat':>10}{'last done':>11}"]
    for client, rs in sorted(by_client(records).items()):
        waiting = sum(max(0.0, min(e, end) - max(s, start)) for s, e in backlog_spans(rs)) / (end - start)
        done = [r for r in rs if r.t_done is not None]
        latency = _mean([r.t_done - r.t_sent for r in done])
        last = max((r.t_done for r in done), default=float("nan"))
        lines.append(f"      {client:<12}{rates[client]:>9.0f}{waiting:>9.2f}{latency:>9.1f}s{last:>10.1f}s")
    arrival_rates = service_rates_in(records, (0.0, arrivals_s), weights)
    lines.append(f"      Jain {jain_index(list(rates.values())):.3f} over the all-active interval "
                 f"[{start:.1f}, {end:.1f}] s, {jain_index(list(arrival_rates.values())):.3f} over the "
                 f"arrivals [0, {arrivals_s:g}] s")
    return lines


def run(args: argparse.Namespace, emit=print) -> None:
    """Every seed x variant of ``args.cell``; each line goes to ``emit`` as soon as it is known."""
    table = VARIANTS | getattr(args, "added", {})  # --add: more variants, for this run only
    workload, scenario, workers = args.cell.split("-")
    sim = {"kv_pool_tokens": args.kv_pool} if args.kv_pool else {}
    profile = getattr(args, "profile", None)
    if profile:
        sim["profile"] = profile
    emit(f"cell {args.cell}, {args.duration:g} s of arrivals, KV pool "
         f"{args.kv_pool or SIM['kv_pool_tokens']} tokens per worker"
         + (f", simulator profile {profile}" if profile else ""))
    emit("variants: " + "; ".join(f"{v} = {table[v][3]}" for v in args.variants))
    emit(f"{'seed':>4}  {'variant':<22}{'service/s':>10}{'vs preble':>10}{'hit':>7}{'jain':>7}{'WB p99':>8}")
    for seed in args.seeds:
        wl = paper_workload(workload, scenario, int(workers), seed, args.duration)
        preble = None
        for name in args.variants:
            policy, router, options, _ = table[name]
            probe = HoldProbe() if args.why_held and router == "d2lpm_global" else None
            row = run_one(wl, policy, router, int(workers), seed, router_options=options,
                          keep_records=args.per_client or probe is not None,
                          **(sim | ({"router_observer": probe} if probe else {})))
            if probe is not None:
                probe.admitted(row["records"])
            if name == "preble":
                preble = row["throughput"]
            ratio = f"{row['throughput'] / preble:.3f}" if preble else "-"
            emit(f"{seed:>4}  {name:<22}{row['throughput']:>10.0f}{ratio:>10}{row['hit_rate']:>7.3f}"
                 f"{row['jain']:>7.3f}{row['wb_p99']:>7.1f}s")
            for line in probe.report() if probe else ():
                emit(line)
            for line in client_lines(row["records"], args.duration) if args.per_client else ():
                emit(line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", required=True, help="WORKLOAD-SCENARIO-D, e.g. judge-s2-4")
    ap.add_argument("--seeds", default="0", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--variants", default="preble,d2lpm,unbounded,no-fairness,no-fairness-unbounded",
                    type=lambda s: s.split(","), help="from: " + ", ".join(VARIANTS))
    ap.add_argument("--add", action="append", default=[], metavar="NAME=JSON",
                    help="one more variant: the default router with these options (repeatable), "
                         "e.g. 'queue-8192={\"local_queue_tokens\": 8192}'; list it in --variants or it is appended")
    ap.add_argument("--kv-pool", type=int, default=0, help="KV pool per worker (default: the grid's)")
    ap.add_argument("--duration", type=float, default=None, help="seconds of arrivals (default: the grid's)")
    ap.add_argument("--profile", help="simulator profile (default: the grid's, h100-llama-3.1-8b); the KV pool "
                                      "stays the grid's unless --kv-pool is given")
    ap.add_argument("--why-held", action="store_true", help="instrument d2lpm_global: prefix lost while held")
    ap.add_argument("--per-client", action="store_true",
                    help="each client's rate, waiting share, latency and last finish; Jain over the arrivals")
    args = ap.parse_args(argv)
    args.added = {}
    for spec in args.add:
        name, _, options = spec.partition("=")
        try:
            parsed = json.loads(options)
        except json.JSONDecodeError as e:
            ap.error(f"--add {spec!r}: the options after '=' must be a JSON object ({e})")
        if not name or not isinstance(parsed, dict):
            ap.error(f"--add {spec!r}: expected NAME={{...}} (a JSON object of router options)")
        args.added[name] = ("dlpm", "d2lpm_global", parsed, f"the default router with {options.strip()}")
        if name not in args.variants:
            args.variants.append(name)
    parts = args.cell.split("-")
    if len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) < 2:
        ap.error(f"--cell must be WORKLOAD-SCENARIO-D with D >= 2, got {args.cell!r}")
    unknown = [v for v in args.variants if v not in VARIANTS and v not in args.added]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.duration is None:
        args.duration = DURATION_S
    if args.profile:
        try:
            load_profile(args.profile)
        except ProfileError as e:
            ap.error(str(e))
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the simulator's per-run notices would bury the table
    try:
        run(args, lambda line: print(line, flush=True))
    finally:
        logging.disable(previous)  # main() may run inside a larger process (tests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
