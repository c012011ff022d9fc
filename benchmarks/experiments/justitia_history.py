"""Write a Justitia demand history (``justitia.history`` JSONL) from a recorded run.

Each program of the run is one application run: its cost is the KV
token-time its calls used, sum of p*d + d(d+1)/2 over the calls (p prompt,
d output tokens, from the records), and its prompt is the first call's token
ids (from the workload, regenerated from the same scenario and seed). Runs
with a failed call are left out.

    python benchmarks/experiments/justitia_history.py --workload apps --scenario justitia_mix --seed 1 \
        --run runs/mix-train --out runs/justitia-history.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sglang_fair.bench.output import read_records
from sglang_fair.workloads.registry import make_workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--seed", type=int, required=True, help="the seed the run used")
    ap.add_argument("--run", required=True, help="run directory (records.jsonl)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    wl = make_workload(args.workload, args.scenario, seed=args.seed)
    cost: dict[str, float] = {}
    failed: set[str] = set()
    for r in read_records(Path(args.run)):
        if not r.ok:
            failed.add(r.program_id)
            continue
        p, d = r.prompt_tokens, r.output_tokens
        cost[r.program_id] = cost.get(r.program_id, 0.0) + p * d + d * (d + 1) / 2
    written = 0
    with open(args.out, "w") as f:
        for prog in wl.programs:
            if prog.program_id in failed or prog.program_id not in cost:
                continue
            f.write(json.dumps({"app": prog.kind, "prompt": list(prog.calls[0].tokens),
                                "cost": cost[prog.program_id]}) + "\n")
            written += 1
    print(f"wrote {written} application runs to {args.out}")


if __name__ == "__main__":
    main()
