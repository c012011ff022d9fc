"""Scheduling-pass time: dlpm (and vtc) against stock lpm, with SGLang's real classes on CPU.

One pass = ``calc_priority`` plus the admission loop of
``Scheduler._get_new_batch_prefill_raw`` (see sglang_fair.testing.engine_pass),
over a waiting queue of N requests from many clients that share prefixes,
half of them cached. Each repetition gets a fresh queue, cache and policy
(built outside the timed region). Prints medians and the ratio to lpm measured
in the same run.

    python benchmarks/speed/scheduling_pass.py [--sizes 32 128 1000 10000] [--reps 15]

SGLang's LPM falls back to FCFS (no prefix matching) above 128 queued
requests; dlpm keeps its deficit gating there (see docs/architecture.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from sglang_fair.testing.engine_pass import admission_pass, enqueue, make_cache, make_policy, make_req, publish_test_runtime

PREFIX_LEN = 256
SUFFIX_LEN = 32
CLIENTS = 64
ADMIT_BUDGET = 16384  # SGLang's default max_prefill_tokens


def _workload(size: int, seed: int):
    rng = random.Random(seed)
    prefixes = {c: [rng.randrange(1, 30000) for _ in range(PREFIX_LEN)] for c in range(CLIENTS)}
    cached = [prefixes[c] for c in range(0, CLIENTS, 2)]
    reqs = []
    for i in range(size):
        c = rng.randrange(CLIENTS)
        ids = prefixes[c] + [rng.randrange(1, 30000) for _ in range(SUFFIX_LEN)]
        reqs.append((f"r{i}", ids, f"client{c}"))
    return cached, reqs


def time_passes(policies: list[str], size: int, reps: int) -> dict[str, tuple[list[float], int]]:
    """Pass times per policy over ``reps`` fresh queues, and how many requests a pass admitted.

    Policies take turns within each repetition (rotating who goes first), so
    drift in machine speed and warm-up effects hit all of them alike.
    """
    results: dict[str, tuple[list[float], int]] = {p: ([], 0) for p in policies}
    for rep in range(reps):
        cached, specs = _workload(size, seed=rep)
        for policy_name in policies[rep % len(policies):] + policies[: rep % len(policies)]:
            tree, alloc = make_cache(cached)
            policy = make_policy(policy_name, tree)
            queue = [make_req(rid, ids, client) for rid, ids, client in specs]
            if hasattr(policy, "on_queued"):
                enqueue(policy, queue)  # arrival-time work, not part of the pass
            start = time.perf_counter()
            admitted = len(admission_pass(policy, tree, alloc, queue, ADMIT_BUDGET))
            results[policy_name][0].append(time.perf_counter() - start)
            results[policy_name] = (results[policy_name][0], admitted)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 128, 1000, 10000])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--policies", nargs="+", default=["lpm", "dlpm", "vtc"])
    args = parser.parse_args()
    publish_test_runtime()
    print(f"{'queue':>7} " + " ".join(f"{p + ' ms':>10}" for p in args.policies) + "  "
          + " ".join(f"{p + '/lpm':>9}" for p in args.policies if p != "lpm") + "  admitted/pass")
    for size in args.sizes:
        reps = max(3, args.reps if size <= 1000 else args.reps // 3)
        results = time_passes(args.policies, size, reps)
        medians = {p: statistics.median(times) * 1e3 for p, (times, _) in results.items()}
        row = f"{size:>7} " + " ".join(f"{medians[p]:>10.2f}" for p in args.policies)
        if "lpm" in medians:
            row += "  " + " ".join(f"{medians[p] / medians['lpm']:>9.2f}" for p in args.policies if p != "lpm")
        row += "  " + " ".join(f"{p}={n}" for p, (_, n) in results.items())
        print(row, flush=True)


if __name__ == "__main__":
    main()
