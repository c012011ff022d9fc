"""``python -m sglang_fair.demo``: DLPM against LPM on the real SGLang engine, on CPU.

Starts the tiny random-weight model twice on this machine (SGLang's real
server, ``python -m sglang_fair.launch_server``), once with ``lpm`` and once
with ``dlpm``, replays the same short multi-client workload against each
(``configs/apps_demo.yaml``: one client keeps the server flooded with chains
of calls that share long prefixes, two light clients send short requests of
their own), and prints each client's outcome side by side. The flood is closed
loop, so the server is saturated whatever the machine's speed. Run directories
with summary.json, records and plots land in ``--out``. Takes a few minutes
on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglang_fair.bench.__main__ import main as bench_main
from sglang_fair.bench.output import read_summary

SERVER_ARGS = "--max-running-requests 4 --max-total-tokens 4096 --fair-quantum 256"


def _run(policy: str, out: Path, server_args: str) -> dict:
    code = bench_main(["run", "--workload", "apps", "--scenario", "demo", "--policy", policy,
                       "--launch", "--launch-args", server_args, "--out", str(out), "--timeout", "600"])
    if code != 0:
        raise SystemExit(f"demo: the {policy} run did not complete (exit {code}); see {out}")
    return read_summary(out)


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.1f}{unit}"


def client_table(summaries: dict[str, dict]) -> str:
    policies = list(summaries)
    clients = list(next(iter(summaries.values()))["clients"])
    head = f"{'client':<10} {'behaves':<8}" + "".join(
        f" | {p + ' service':>13} {p + ' done':>9} {p + ' wait':>9}" for p in policies)
    rows = [head, "-" * len(head)]
    for client in clients:
        info = summaries[policies[0]]["clients"][client]
        row = f"{client:<10} {'yes' if info['well_behaved'] else 'NO':<8}"
        for p in policies:
            c = summaries[p]["clients"][client]
            done, wait = c["program_latency_s"]["p50"], c["request_latency_s"]["max"]
            row += f" | {_fmt(c['service']):>13} {_fmt(done, 's'):>9} {_fmt(wait, 's'):>9}"
        rows.append(row)
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sglang_fair.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/demo", help="where the run directories go (default runs/demo)")
    parser.add_argument("--server-args", default=SERVER_ARGS, help=f"server flags (default: {SERVER_ARGS!r})")
    args = parser.parse_args(argv)
    out = Path(args.out)
    summaries = {policy: _run(policy, out / policy, args.server_args) for policy in ("lpm", "dlpm")}
    print("\nPer-client outcome. service: input + 2 x output tokens; done: median time to finish one of the\n"
          "client's call chains; wait: the longest any one request of the client took.\n")
    print(client_table(summaries))
    print()
    for policy, summary in summaries.items():
        o = summary["overall"]
        print(f"{policy:>5}: Jain {_fmt(o['jain_index'])}, cache hit rate {_fmt((o.get('cache_hit_rate') or 0) * 100, '%')}, "
              f"{o['requests_ok']}/{o['requests']} requests ok")
    bench_main(["compare", str(out / "lpm"), str(out / "dlpm"), "--out", str(out / "compare.png")])
    print(f"\nPlots and records: {out}/lpm, {out}/dlpm, {out}/compare.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
