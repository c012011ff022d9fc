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
from sglang_fair.bench.report import GLOSSARY, client_table, overall_line

SERVER_ARGS = "--max-running-requests 4 --max-total-tokens 4096 --fair-quantum 256"


def _run(policy: str, out: Path, server_args: str) -> dict:
    code = bench_main(["run", "--workload", "apps", "--scenario", "demo", "--policy", policy,
                       "--launch", "--launch-args", server_args, "--out", str(out), "--timeout", "600"])
    if code != 0:
        raise SystemExit(f"demo: the {policy} run did not complete (exit {code}); see {out}")
    return read_summary(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sglang_fair.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/demo", help="where the run directories go (default runs/demo)")
    parser.add_argument("--server-args", default=SERVER_ARGS, help=f"server flags (default: {SERVER_ARGS!r})")
    args = parser.parse_args(argv)
    out = Path(args.out)
    summaries = {policy: _run(policy, out / policy, args.server_args) for policy in ("lpm", "dlpm")}
    print(f"\nPer-client outcome. {GLOSSARY}\n")
    print(client_table(summaries))
    print()
    for policy, summary in summaries.items():
        print(overall_line(f"{policy:>5}", summary))
    bench_main(["compare", str(out / "lpm"), str(out / "dlpm"), "--out", str(out / "compare.png")])
    print(f"\nPlots and records: {out}/lpm, {out}/dlpm, {out}/compare.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
