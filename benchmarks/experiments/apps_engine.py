"""FairServe's and Justitia's headline comparisons replayed on the real SGLang server (tiny CPU model).

The real-engine counterpart of the simulator figures ``bench paper fairserve``
and ``bench paper justitia`` (sglang_fair/bench/paper/apps.py), with the same
scenarios (configs/apps_*.yaml), policy settings
(configs/policy_paper_scenarios.yaml) and checks:

* fairserve_abuse (fairserve, vtc): the abuser's share of requests refused
  (HTTP 429) >= 0.05, the benign users' <= 0.01, the benign users' P90
  interaction completion time FairServe / VTC <= 1;
* justitia_mix, justitia_starvation (justitia, vtc, fcfs): mean application
  completion time Justitia / VTC and Justitia / FCFS <= 1; for starvation
  also the elephant's completion time Justitia / VTC <= 1.

Per scenario and system, one tiny CPU server (``sglang_fair.launch_server
--policy SYSTEM``, 8,192-token KV pool) is started, the scenario's programs
arriving in its first ``--seconds`` are replayed over HTTP as ``bench run``
does (token ids fitted to the model's vocabulary the same way), and the
server is stopped before the next one starts. Calls that do not fit the
model's 2,048-token context (prompt and output; the server refuses them with
HTTP 400) are dropped before the replay, with the calls that depend on them,
and counted, so that every system gets the same workload. Every call must end
as exactly one record (an answer, a refusal or an explicit error): the script
prints that check per system and exits 1 if it fails (checks of the figures
not held do not change the exit status).

``--seconds`` defaults per scenario (given, it applies to every scenario),
so that each overloads the tiny server and the whole run takes minutes.
Measured alone on a 2-core machine (docs/results/2026-12-06-apps-engine-cpu.md;
a server takes about 25 s to start, and the whole run about 8 minutes):

* fairserve_abuse, 3 s: 68 programs (149 calls, 132 of them the abuser's,
  far more than FairServe's 20 a user per 20 s); 23-28 s of replay per system;
* justitia_mix, 1 s: 11 applications (31 calls; each user's first
  application arrives at once); about 15 s of replay per system;
* justitia_starvation, 1 s: the elephant and 25 mice (105 calls); the
  elephant (30 map calls of 200 tokens over a 1,500-token prompt, a few at
  a time in the 8,192-token pool) is the same work whatever ``--seconds``
  is: about 55 s of replay per system.

    PYTHONPATH=. python benchmarks/experiments/apps_engine.py \\
        [--scenarios fairserve_abuse justitia_mix justitia_starvation] [--seconds S] [--seed 0] \\
        [--json out.json] [--plot out.png] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from sglang_fair.bench.backends import make_backend
from sglang_fair.bench.flood import server_log_dir
from sglang_fair.bench.model_vocab import fit_to_model, read_model_vocab
from sglang_fair.bench.paper.apps import (POLICY_CONFIG, completion_times, fairserve_checks, justitia_checks,
                                          plot_cdf_panel)
from sglang_fair.bench.paper.claims import Check
from sglang_fair.bench.paper.common import percentile
from sglang_fair.bench.paper_grid import prompt_lengths
from sglang_fair.runs.records import RequestRecord
from sglang_fair.testing.server import LocalServer, ServerStartError
from sglang_fair.tiny_cpu import TinyLlamaSpec
from sglang_fair.workloads.model import Call, Workload
from sglang_fair.workloads.registry import make_workload

SCENARIOS = {"fairserve_abuse": ("fairserve", "vtc"), "justitia_mix": ("justitia", "vtc", "fcfs"),
             "justitia_starvation": ("justitia", "vtc", "fcfs")}
CONTEXT_TOKENS = TinyLlamaSpec().max_position_embeddings  # the tiny model's context
DEFAULT_SECONDS = {"fairserve_abuse": 3.0, "justitia_mix": 1.0, "justitia_starvation": 1.0}  # why: the docstring
KV_POOL_TOKENS = LocalServer.max_total_tokens


def scenario_workload(name: str, seed: int, seconds: float, vocab_size: int | None = None) -> Workload:
    """The scenario's programs arriving in its first ``seconds`` (ids in ``vocab_size`` if given)."""
    wl = make_workload("apps", name, {"vocab_size": vocab_size} if vocab_size else None, seed=seed)
    wl.programs = [p for p in wl.programs if p.arrival < seconds]
    return wl


def drop_unfit(wl: Workload, context: int = CONTEXT_TOKENS) -> tuple[Workload, int, int]:
    """The workload without the calls whose prompt and output exceed ``context`` tokens (as the
    server checks them), nor the calls depending on those; and how many calls and whole programs
    were dropped."""
    programs, dropped_calls, dropped_programs = [], 0, 0
    for p in wl.programs:
        index: dict[int, int] = {}  # old call index -> new
        calls: list[Call] = []
        for i, (n, c) in enumerate(zip(prompt_lengths(p.calls), p.calls)):
            if n + c.max_new_tokens <= context and all(q in index for q in c.parents):
                index[i] = len(calls)
                calls.append(dataclasses.replace(c, parents=tuple(index[q] for q in c.parents)))
        dropped_calls += len(p.calls) - len(calls)
        if calls:
            programs.append(dataclasses.replace(p, calls=tuple(calls)))
        else:
            dropped_programs += 1
    return Workload(wl.name, programs, wl.seed, dict(wl.meta)), dropped_calls, dropped_programs


def prepare(name: str, seed: int, seconds: float, url: str) -> tuple[Workload, dict]:
    """The workload replayed on every system: ids fitted to the model at ``url`` (as ``bench
    run``), calls over the context dropped; and what was done, for the report."""
    wl = scenario_workload(name, seed, seconds)
    wl, notice = fit_to_model(wl, read_model_vocab(url), chosen=None,
                              regenerate=lambda size: scenario_workload(name, seed, seconds, size))
    if notice:
        print(notice, file=sys.stderr, flush=True)
    calls = wl.num_calls()
    wl, dropped_calls, dropped_programs = drop_unfit(wl)
    print(f"[{name}] {len(wl.programs)} programs, {wl.num_calls()} calls arriving in {seconds:g} s; dropped "
          f"{dropped_calls} of {calls} calls ({dropped_programs} whole programs) over the model's "
          f"{CONTEXT_TOKENS}-token context", flush=True)
    return wl, {"seconds": seconds, "programs": len(wl.programs), "calls": wl.num_calls(),
                "dropped_calls": dropped_calls, "dropped_programs": dropped_programs,
                "vocab_size": wl.meta.get("vocab_size")}


def answered_once(wl: Workload, records: list[RequestRecord]) -> tuple[bool, str]:
    """Whether every call of ``wl`` ended as exactly one record, and the line saying so."""
    expected = {f"{p.program_id}-{i}" for p in wl.programs for i in range(len(p.calls))}
    seen = collections.Counter(r.rid for r in records)
    twice = sorted(rid for rid, n in seen.items() if n > 1)
    missing, unknown = expected - set(seen), set(seen) - expected
    ok = not (twice or missing or unknown)
    line = f"{len(expected)} calls, {len(records)} records: every call answered or refused exactly once"
    if not ok:
        line += f" FAILED ({len(missing)} without a record, {len(twice)} twice, {len(unknown)} unknown)"
    return ok, line


def run_system(name: str, system: str, seed: int, seconds: float, log_dir: Path,
               wl: Workload | None) -> tuple[Workload, dict | None, list[RequestRecord], list[str]]:
    """One server running ``system``: the workload (prepared on the first server), what preparing
    it did (None if given), the records and the run-level errors."""
    log = log_dir / f"{name}-{system}.log"
    print(f"[{name}] {system}: starting the tiny CPU server (log: {log}) ...", file=sys.stderr, flush=True)
    args = ["--policy", system, "--fair-policy-config", POLICY_CONFIG]
    with LocalServer(module="sglang_fair.launch_server", extra_args=args, log_path=log) as server:
        info = None
        if wl is None:
            wl, info = prepare(name, seed, seconds, server.base_url)
        started = time.monotonic()
        result = make_backend(server.base_url, policy=system).run(wl, progress=False)
        print(f"[{name}] {system}: replayed in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        errors = list(result.errors)
        if server.poll() is not None:
            errors.append(f"the server exited with code {server.poll()} during the run; log: {log}")
    return wl, info, result.records, errors


def system_row(records: list[RequestRecord]) -> dict:
    times = list(completion_times(records).values())
    unsent = sum(not r.ok and not r.throttled and (r.error or "").startswith("parent failed") for r in records)
    return {"requests": len(records), "ok": sum(r.ok for r in records),
            "throttled": sum(r.throttled for r in records), "not_sent": unsent,
            "errors": sum(not r.ok and not r.throttled for r in records) - unsent,
            "programs_completed": len(times), "mean_completion_s": sum(times) / len(times) if times else None,
            "p90_completion_s": percentile(times, 90)}


def _num(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.3g}"


def check_line(c: Check) -> str:
    verdict = {True: "held", False: "not held", None: "not measured"}[c.held]
    return f"{c.metric} = {_num(c.value)} (target {c.op} {c.target:g}): {verdict}"


def run_scenario(name: str, seed: int, seconds: float, log_dir: Path) -> dict:
    wl, info, records, problems = None, {}, {}, {}
    for system in SCENARIOS[name]:
        wl, first, records[system], problems[system] = run_system(name, system, seed, seconds, log_dir, wl)
        info = first or info
    benign = {p.client for p in wl.programs if p.well_behaved}
    checks = (fairserve_checks(records, benign) if name == "fairserve_abuse"
              else justitia_checks(name, records)[0])
    rows, complete = {}, True
    for system, recs in records.items():
        ok, line = answered_once(wl, recs)
        ok = ok and not problems[system]
        complete &= ok
        rows[system] = system_row(recs) | {"answered_once": ok, "answered_line": line, "run_errors": problems[system]}
    return info | {"systems": rows, "checks": [dataclasses.asdict(c) | {"held": c.held} for c in checks],
                   "check_lines": [check_line(c) for c in checks], "answered_once": complete,
                   "benign_clients": sorted(benign) if name == "fairserve_abuse" else None,
                   "records": records}


def format_scenario(name: str, out: dict) -> str:
    lines = [f"== {name}: {out['programs']} programs, {out['calls']} calls ({out['dropped_calls']} calls over the "
             f"{CONTEXT_TOKENS}-token context dropped)",
             f"{'system':<11}{'ok':>6}{'errors':>8}{'throttled':>11}{'not sent':>10}{'completed':>11}"
             f"{'mean s':>9}{'P90 s':>9}"]
    for system, row in out["systems"].items():
        lines.append(f"{system:<11}{row['ok']:>6}{row['errors']:>8}{row['throttled']:>11}{row['not_sent']:>10}"
                     f"{row['programs_completed']:>11}{_num(row['mean_completion_s']):>9}"
                     f"{_num(row['p90_completion_s']):>9}")
    lines += [f"{system}: {row['answered_line']}" + "".join(f"; {e}" for e in row["run_errors"])
              for system, row in out["systems"].items()]
    return "\n".join(lines + out["check_lines"])


def plot(results: dict[str, dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.8), squeeze=False)
    for ax, (name, out) in zip(axes[0], results.items()):
        clients = set(out["benign_clients"]) if out["benign_clients"] is not None else None
        plot_cdf_panel(ax, out["records"], f"{name}" + (": benign users" if clients else ""), clients)
    fig.suptitle("Application completion times on the real SGLang server (tiny CPU model)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--seconds", type=positive_seconds,
                        help="replay the programs arriving in each scenario's first SECONDS (default: "
                             + ", ".join(f"{n} {s:g}" for n, s in DEFAULT_SECONDS.items()) + ")")
    parser.add_argument("--seed", type=int, default=0, help="the scenarios' seed (bench paper's default: 0)")
    parser.add_argument("--json", help="write every figure and check as JSON here")
    parser.add_argument("--plot", help="write the completion-time CDFs (a panel per scenario) as a PNG here")
    parser.add_argument("--log-dir", type=Path, help="where the servers' logs go (default: a new temporary directory)")
    args = parser.parse_args(argv)
    log_dir = server_log_dir(args, "apps-engine-")
    results = {}
    for name in dict.fromkeys(args.scenarios):
        try:
            results[name] = run_scenario(name, args.seed, args.seconds or DEFAULT_SECONDS[name], log_dir)
        except ServerStartError as e:
            print(f"error: a server did not start: {e}", file=sys.stderr)
            return 1
        print(format_scenario(name, results[name]), flush=True)
    complete = all(out["answered_once"] for out in results.values())
    print(f"every request answered or refused exactly once, on every system: {'PASS' if complete else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            scenarios = {n: {k: v for k, v in out.items() if k != "records"} for n, out in results.items()}
            json.dump({"seed": args.seed, "context_tokens": CONTEXT_TOKENS, "kv_pool_tokens": KV_POOL_TOKENS,
                       "policy_config": POLICY_CONFIG, "answered_once": complete, "scenarios": scenarios}, f, indent=2)
    if args.plot:
        plot(results, args.plot)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
