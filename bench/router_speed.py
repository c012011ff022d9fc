"""Routing decision time per request: D²LPM (and baselines) vs round-robin, same run.

Setup (issue 5): D = 8 workers, 4,096-token prompts built from a pool of shared
system prefixes plus unique tails, and a global index pre-filled to at least
1M tokens (``--prefill-tokens``) with an LRU cap above it (``--capacity``), so
the measured phase also pays for insertion and cap evictions. Completions are
fed back with a lag so queues stay at a realistic depth; their cost is
reported separately. Prompt generation is not timed. Times are wall clock
(p50/p99/max) and, for p99, also the thread's CPU time, which excludes
preemption by other processes on a shared machine.

    PYTHONPATH=. python bench/router_speed.py            # full run (~1 min)
    PYTHONPATH=. python bench/router_speed.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time

from sglang_fair.router import ROUTERS, make_router

PROMPT_LEN = 4096


class PromptSource:
    """Prompts = one of ``num_prefixes`` shared prefixes (1k-3k tokens) + unique tail."""

    def __init__(self, seed: int, num_prefixes: int = 256, vocab: int = 128_000) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocab
        self.prefixes = [
            [self.rng.randrange(vocab) for _ in range(self.rng.randint(1024, 3072))] for _ in range(num_prefixes)
        ]

    def next(self) -> tuple[str, list[int]]:
        rng = self.rng
        group = rng.randrange(len(self.prefixes))
        prefix = self.prefixes[group]
        tail = [rng.randrange(self.vocab) for _ in range(PROMPT_LEN - len(prefix))]
        return f"client{group % 32}", prefix + tail


def measure(name: str, args: argparse.Namespace) -> dict[str, float]:
    options = {"index_capacity_tokens": args.capacity} if "index_capacity_tokens" in _params(name) else {}
    router = make_router(name, args.workers, **options)
    source = PromptSource(args.seed)
    inflight: list[tuple[str, int]] = []
    cpu_ns: list[int] = []
    seq = 0

    def one(timed: bool) -> tuple[int, int]:
        nonlocal seq
        client, tokens = source.next()
        rid = f"r{seq}"
        seq += 1
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        w = router.route(rid, client, tokens, 256)
        t1 = time.perf_counter_ns()
        cpu_ns.append(time.thread_time_ns() - c0)
        inflight.append((rid, w))
        f0 = f1 = 0
        if len(inflight) > args.queue_depth:
            done, dw = inflight.pop(0)
            f0 = time.perf_counter_ns()
            router.on_finish(done, dw, 256)
            f1 = time.perf_counter_ns()
        return (t1 - t0, f1 - f0) if timed else (0, 0)

    index = getattr(router, "index", None)
    while index is not None and index.total_tokens < args.prefill_tokens:
        one(False)
    warm_tokens = index.total_tokens if index is not None else 0
    gc.collect()
    cpu_ns.clear()
    route_ns, finish_ns = [], []
    wall0 = time.perf_counter()
    for _ in range(args.requests):
        r, f = one(True)
        route_ns.append(r)
        if f:
            finish_ns.append(f)
    wall = time.perf_counter() - wall0
    route_us = sorted(x / 1000 for x in route_ns)
    cpu_us = sorted(x / 1000 for x in cpu_ns)
    return {
        "cpu_p99_us": cpu_us[int(0.99 * (len(cpu_us) - 1))],
        "p50_us": statistics.median(route_us),
        "p99_us": route_us[int(0.99 * (len(route_us) - 1))],
        "max_us": route_us[-1],
        "route_per_s": len(route_us) / (sum(route_us) / 1e6),
        "finish_p50_us": statistics.median(finish_ns) / 1000 if finish_ns else 0.0,
        "index_tokens_start": warm_tokens,
        "index_tokens_end": index.total_tokens if index is not None else 0,
        "wall_s": wall,
    }


def _params(name: str) -> set[str]:
    import inspect

    return set(inspect.signature(ROUTERS[name].__init__).parameters)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--requests", type=int, default=5000, help="timed route() calls per router")
    ap.add_argument("--prefill-tokens", type=int, default=1_000_000, help="index size before timing")
    ap.add_argument("--capacity", type=int, default=2_000_000, help="index LRU cap in tokens")
    ap.add_argument("--queue-depth", type=int, default=256, help="requests in flight before completions")
    ap.add_argument("--routers", default="round_robin,d2lpm,preble,cache_aware")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-p99-us", type=float, default=200.0)
    ap.add_argument("--quick", action="store_true", help="small run for CI smoke tests")
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.prefill_tokens, args.capacity = 300, 100_000, 200_000
    names = [n.strip() for n in args.routers.split(",") if n.strip()]
    for n in names:
        if n not in ROUTERS:
            ap.error(f"unknown router {n!r}; choose from {', '.join(sorted(ROUTERS))}")
    print(
        f"D={args.workers} prompt={PROMPT_LEN} tokens, {args.requests} timed requests, "
        f"index prefilled to >= {args.prefill_tokens} tokens, cap {args.capacity}, python {sys.version.split()[0]}, "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus"
    )
    results = {n: measure(n, args) for n in names}
    base = results.get("round_robin")
    print(f"{'router':<24}{'p50 us':>9}{'p99 us':>9}{'cpu p99':>9}{'max us':>10}{'req/s':>11}{'finish us':>11}{'index tok':>12}{'vs rr p50':>11}")
    for n, r in results.items():
        ratio = f"{r['p50_us'] / base['p50_us']:.1f}x" if base else "-"
        print(
            f"{n:<24}{r['p50_us']:>9.1f}{r['p99_us']:>9.1f}{r['cpu_p99_us']:>9.1f}{r['max_us']:>10.1f}{r['route_per_s']:>11.0f}"
            f"{r['finish_p50_us']:>11.2f}{r['index_tokens_end']:>12}{ratio:>11}"
        )
    verdict = 0
    if "d2lpm" in results:
        p99, cpu = results["d2lpm"]["p99_us"], results["d2lpm"]["cpu_p99_us"]
        ok = p99 <= args.target_p99_us
        print(f"d2lpm p99 {p99:.1f} us (wall) / {cpu:.1f} us (cpu) vs target {args.target_p99_us:.0f} us: "
              f"{'PASS' if ok else 'MISS'} (wall)")
        verdict = 0 if ok else 1
    return verdict


if __name__ == "__main__":
    raise SystemExit(main())
