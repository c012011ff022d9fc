"""Simulator speed: replay a ToT S1-like workload at D=8 and print simulated
requests per wall-clock second (target: 20,000 per minute on one core).

The workload is built here from the data model so the benchmark does not
depend on the generators' defaults: 4 clients send Tree-of-Thoughts programs
(height 4) at the same Gamma-process program rate; client 0 misbehaves with
4 branches (340 calls a tree), the others use 2 (30 calls a tree), as in the
DLPM paper's Table 3 S1. Prompts: a 400-token shared template, a ~70-token
question, 16-token step instructions; every call outputs 256 tokens.

    PYTHONPATH=. python benchmarks/speed/sim_speed.py [--policy dlpm] [--router d2lpm] [--rate 5] [--kv-pool 60000]
"""

from __future__ import annotations

import argparse
import random
import time

from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Call, Program, Workload


def tot_s1(programs_per_client: int, seed: int, rate: float, vocab: int = 32000) -> Workload:
    rng = random.Random(seed)
    template = tuple(rng.randrange(vocab) for _ in range(400))
    programs = []
    for c in range(4):
        branches = 4 if c == 0 else 2
        t = 0.0
        for k in range(programs_per_client):
            t += rng.gammavariate(0.25, 4.0 / rate)  # Gamma process, CV 2
            question = tuple(rng.randrange(vocab) for _ in range(max(8, int(rng.gauss(70, 28)))))
            calls: list[Call] = []
            frontier: list[int | None] = [None]
            for _depth in range(4):
                nxt = []
                for parent in frontier:
                    for _ in range(branches):
                        step = tuple(rng.randrange(vocab) for _ in range(16))
                        if parent is None:
                            calls.append(Call(template + question + step, 256))
                        else:
                            calls.append(Call(step, 256, parents=(parent,), extends_parent=True))
                        nxt.append(len(calls) - 1)
                frontier = nxt
            programs.append(Program(f"c{c}/tot{k}", f"client{c}", t, tuple(calls), well_behaved=c != 0, kind="tot"))
    return Workload("tot-s1-bench", programs, seed=seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="dlpm")
    ap.add_argument("--router", default="round_robin")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--programs", type=int, default=12, help="programs per client")
    ap.add_argument("--rate", type=float, default=0.5, help="programs per second per client")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kv-pool", type=int, default=None, help="KV pool per worker (default: the profile's)")
    args = ap.parse_args()
    workload = tot_s1(args.programs, args.seed, args.rate)
    backend = SimBackend(policy=args.policy, seed=args.seed, num_workers=args.workers, router=args.router,
                         kv_pool_tokens=args.kv_pool)
    t0 = time.perf_counter()
    result = backend.run(workload, progress=False)
    wall = time.perf_counter() - t0
    n = len(result.records)
    ok = sum(r.ok for r in result.records)
    print(f"workload: {n} requests ({ok} ok), D={args.workers}, policy={args.policy}, router={args.router}")
    print(f"simulated time: {result.meta['sim_time_s']:.1f} s, wall: {wall:.2f} s")
    print(f"speed: {n / wall:,.0f} simulated requests per wall-clock second "
          f"({60 * n / wall:,.0f} per minute; target 20,000 per minute)")
    print(f"extrapolated: {result.meta['extrapolated']}, "
          f"retractions: {sum(w['retractions'] for w in result.meta['workers'])}")


if __name__ == "__main__":
    main()
