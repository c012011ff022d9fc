"""Routing decision time per request: D²LPM (and baselines) vs round-robin, same run.

Setup (issue 5): D = 8 workers, 4,096-token prompts built from a pool of shared
system prefixes plus unique tails, and a global index pre-filled to at least
1M tokens (``--prefill-tokens``) with an LRU cap above it (``--capacity``), so
the measured phase also pays for insertion and cap evictions. Completions are
fed back with a lag so queues stay at a realistic depth; their cost is
reported separately (late-binding routers also get each placement's
admission reported at once, so their local queues drain). Prompt generation
is not timed; each prompt reaches ``route`` as SGLang 0.5.23's data-parallel
controller receives it: an ``array("q")`` of token ids, fresh from the
request's unpickling (TokenizedGenerateReqInput.input_ids). Times are wall
clock (p50/p99/max) and the thread's CPU time (p50/p99), which excludes
preemption by other processes on a shared machine.

Each router is timed in blocks of ``--block`` requests alternating with
blocks of round-robin's, and its ratio is taken to the round-robin blocks run
between its own: on a shared VM whose speed drifts from minute to minute, both
sides of a ratio then see the same minutes.

Targets, checked on D²LPM in the same run: p50 within ``--target-ratio`` x
round-robin's p50 (wall), and p99 <= ``--target-p99-us`` (wall). On
``d2lpm_global``, the default router: route p99 <= ``--target-default-p99-us``
with nothing held; with the backlog held, completion + admission p99 <=
``--target-completion-p99-us`` and the whole cost of one request (route,
admission report, progress reports, completion) p50 <=
``--target-request-p50-us``.

    PYTHONPATH=. python benchmarks/speed/router_speed.py            # full run (~1 min)
    PYTHONPATH=. python benchmarks/speed/router_speed.py --quick    # smoke run
    PYTHONPATH=. python benchmarks/speed/router_speed.py --memory   # index memory per 1M tokens

``--baseline-index FILE`` adds a row "d2lpm@baseline": D²LPM over the
``RadixIndex`` class of FILE (e.g. an older radix_index.py taken from git), fed
``list(input_ids)`` inside the timed call, as the data-parallel controller
did before indexes read SGLang's arrays directly.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import random
import statistics
import sys
import time
import tracemalloc
from array import array

from sglang_fair.router import ROUTERS, make_router
from sglang_fair.router.radix_index import PACKED_TOKEN_BYTES, RadixIndex

PROMPT_LEN = 4096
MAX_NEW = 256  # output tokens per request
# The schedulers report a running request's output every this many tokens to a router that holds
# requests (binding/scheduler/router_reports.py: PROGRESS_EVERY_TOKENS; a test keeps the two equal).
PROGRESS_EVERY = 8


class PromptSource:
    """Prompts = one of ``num_prefixes`` shared prefixes (1k-3k tokens) + unique tail."""

    def __init__(self, seed: int, num_prefixes: int = 256, vocab: int = 128_000) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocab
        self.prefixes = [
            [self.rng.randrange(vocab) for _ in range(self.rng.randint(1024, 3072))] for _ in range(num_prefixes)
        ]

    def next(self) -> tuple[str, array]:
        rng = self.rng
        group = rng.randrange(len(self.prefixes))
        prefix = self.prefixes[group]
        tail = [rng.randrange(self.vocab) for _ in range(PROMPT_LEN - len(prefix))]
        return f"client{group % 32}", array("q", prefix + tail)


class Load:
    """One router under the benchmark's load: fresh prompts, completions fed back with a lag.

    Built with its index prefilled to ``args.prefill_tokens``; each ``step`` is one request.
    """

    def __init__(self, name: str, args: argparse.Namespace, baseline_index: type | None = None) -> None:
        options = {"index_capacity_tokens": args.capacity} if "index_capacity_tokens" in _params(name) else {}
        self.router = make_router(name, args.workers, **options)
        if baseline_index is not None:
            self.router.index = baseline_index(args.workers, args.capacity)
        self.as_list = baseline_index is not None
        self.source = PromptSource(args.seed)
        self.queue_depth = args.queue_depth
        self.inflight: list[tuple[str, int]] = []
        self.seq = 0
        self.index = getattr(self.router, "index", None)
        while self.index is not None and self.index.total_tokens < args.prefill_tokens:
            self.step()
        self.warm_tokens = self.index.total_tokens if self.index is not None else 0

    def step(self) -> tuple[int, int, int]:
        """Route one request: (wall ns, thread CPU ns, wall ns of the completion fed back or 0)."""
        router = self.router
        client, tokens = self.source.next()
        rid = f"r{self.seq}"
        self.seq += 1
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        w = router.route(rid, client, list(tokens) if self.as_list else tokens, MAX_NEW)
        t1 = time.perf_counter_ns()
        cpu = time.thread_time_ns() - c0
        placed = ([(rid, w)] if w is not None else []) + router.take_released()
        for done in placed:
            router.on_admitted(*done)
        self.inflight.extend(placed)
        finish = 0
        if len(self.inflight) > self.queue_depth:
            done, dw = self.inflight.pop(0)
            f0 = time.perf_counter_ns()
            router.on_finish(done, dw, MAX_NEW)
            finish = time.perf_counter_ns() - f0
        return t1 - t0, cpu, finish


def measure(
    name: str, args: argparse.Namespace, baseline_index: type | None = None, paired: Load | None = None
) -> tuple[dict[str, float], list[tuple[int, int, int]]]:
    """Time ``args.requests`` routes of ``name``: its summary, and ``paired``'s samples.

    With ``paired``, the routes go in blocks of ``args.block`` requests alternating with
    as many of ``paired``'s, timed too (``Load.step``'s tuples).
    """
    load = Load(name, args, baseline_index)
    gc.collect()
    mine: list[tuple[int, int, int]] = []
    theirs: list[tuple[int, int, int]] = []
    while len(mine) < args.requests:
        block = min(args.block, args.requests - len(mine))
        mine.extend(load.step() for _ in range(block))
        if paired is not None:
            theirs.extend(paired.step() for _ in range(block))
    return _summary(load, mine), theirs


def _summary(load: Load, samples: list[tuple[int, int, int]]) -> dict[str, float]:
    route_us = sorted(r / 1000 for r, _, _ in samples)
    cpu_us = sorted(c / 1000 for _, c, _ in samples)
    finish_us = [f / 1000 for _, _, f in samples if f]
    return {
        "cpu_p50_us": statistics.median(cpu_us),
        "cpu_p99_us": cpu_us[int(0.99 * (len(cpu_us) - 1))],
        "p50_us": statistics.median(route_us),
        "p99_us": route_us[int(0.99 * (len(route_us) - 1))],
        "max_us": route_us[-1],
        "route_per_s": len(route_us) / (sum(route_us) / 1e6),
        "finish_p50_us": statistics.median(finish_us) if finish_us else 0.0,
        "index_tokens_start": load.warm_tokens,
        "index_tokens_end": load.index.total_tokens if load.index is not None else 0,
    }


class Backlog:
    """A late-binding router with ``args.backlog`` requests held: the case it exists for.

    Each worker runs ``queue_depth / workers`` requests and admits from its
    local queue in order when one finishes; one request finishes per arrival
    once the router holds ``backlog``, so the backlog stays at that depth and
    every completion's admission makes the router place a held request.
    A completion's time is the router's share of it: the finish report and
    the admission reports it causes, with the placements they trigger.

    A request's whole cost is every router call made for it: its route, its
    admission report, its progress reports and its completion, each with the
    placements it triggers; each call is counted once, for the request it
    reports (an admission that a completion causes belongs to the admitted
    request). Progress is reported as the schedulers report it
    (binding/scheduler/router_reports.py): each arrival is one decode step of
    every running request, after which each worker reports those of its
    running requests that produced their first token or ``--progress-every``
    tokens since their last report, and the controller hands the router one
    row at a time (binding/controller/worker_feedback.py).

    Built with its index filled and its backlog held; each ``one`` is one arrival.
    """

    def __init__(self, name: str, args: argparse.Namespace) -> None:
        self.router = router = make_router(name, args.workers, index_capacity_tokens=args.capacity)
        self.args, self.source = args, PromptSource(args.seed)
        self.slots = max(1, args.queue_depth // args.workers)
        self.every = max(1, getattr(args, "progress_every", PROGRESS_EVERY))
        self.local: list[list[str]] = [[] for _ in range(args.workers)]
        self.running: list[tuple[str, int]] = []
        self.busy = [0] * args.workers
        self.cost: dict[str, int] = {}  # rid -> ns of router calls made for it so far
        self.started: dict[str, int] = {}  # rid -> the decode step it was admitted at
        self.reported: dict[str, int] = {}  # rid -> output tokens last reported
        self.seq = self.step = 0
        self.busy_ns = 0  # every timed router call's, from the end of the warm-up on
        # Timed samples (ns) and counts, from the end of the warm-up on.
        self.samples: dict[str, list[int]] = {k: [] for k in ("route", "route_cpu", "finish", "finish_cpu",
                                                               "held", "whole", "reports")}
        while router.index.total_tokens < args.prefill_tokens or router.snapshot().held_requests < args.backlog:
            self.one()
        for values in self.samples.values():
            values.clear()
        self.busy_ns = 0
        gc.collect()

    def settle(self, placed: list[tuple[str, int]]) -> None:
        """Queue the placements locally, admit into free slots; repeat while admissions place more."""
        router, local, busy, cost = self.router, self.local, self.busy, self.cost
        while True:
            for rid, w in placed:
                local[w].append(rid)
            for w in range(self.args.workers):
                while busy[w] < self.slots and local[w]:
                    rid = local[w].pop(0)
                    busy[w] += 1
                    self.running.append((rid, w))
                    self.started[rid], self.reported[rid] = self.step, 0
                    t0 = time.perf_counter_ns()
                    router.on_admitted(rid, w)
                    t = time.perf_counter_ns() - t0
                    cost[rid] = cost.get(rid, 0) + t
                    self.busy_ns += t
            placed = router.take_released()
            if not placed:
                return

    def decode_step(self) -> None:
        """Every running request produces a token; each worker reports those due (router_reports.py's rule)."""
        router, every, reported = self.router, self.every, self.reported
        due: list[list[tuple[str, int]]] = [[] for _ in range(self.args.workers)]
        for rid, w in self.running:
            out = min(self.step - self.started[rid], MAX_NEW - 1)
            last = reported[rid]
            if out - last >= every or (last == 0 and out > 0):
                reported[rid] = out
                due[w].append((rid, out))
        for w, items in enumerate(due):
            for rid, out in items:
                t0 = time.perf_counter_ns()
                router.on_progress(rid, w, out)
                t = time.perf_counter_ns() - t0
                self.busy_ns += t
                self.cost[rid] += t
            if items:
                self.settle(router.take_released())  # a slot about to free may have placed held requests

    def one(self) -> None:
        """One arrival, then, with the backlog held, one decode step and the oldest request's completion."""
        router, samples = self.router, self.samples
        client, tokens = self.source.next()
        rid = f"r{self.seq}"
        self.seq += 1
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        w = router.route(rid, client, tokens, MAX_NEW)
        samples["route"].append(time.perf_counter_ns() - t0)
        samples["route_cpu"].append(time.thread_time_ns() - c0)
        self.cost[rid] = samples["route"][-1]
        self.busy_ns += samples["route"][-1]
        self.settle(([(rid, w)] if w is not None else []) + router.take_released())
        if router.snapshot().held_requests >= self.args.backlog and self.running:
            self.step += 1
            self.decode_step()
            done, dw = self.running.pop(0)
            self.busy[dw] -= 1
            c0, f0 = time.thread_time_ns(), time.perf_counter_ns()
            router.on_finish(done, dw, MAX_NEW)
            finish = time.perf_counter_ns() - f0
            self.busy_ns += finish
            self.settle(router.take_released())  # the freed slot admits a local request: the router places more
            samples["finish_cpu"].append(time.thread_time_ns() - c0)
            samples["finish"].append(time.perf_counter_ns() - f0)
            # The admissions the completion caused are their requests' own (``settle``), not counted here again.
            samples["whole"].append(self.cost.pop(done, 0) + finish)
            last = self.reported.pop(done)
            samples["reports"].append(0 if last == 0 else 1 + (last - 1) // self.every)
            del self.started[done]
        samples["held"].append(router.snapshot().held_requests)

    def summary(self) -> dict[str, float]:
        def pct(key: str, q: float) -> float:
            values = sorted(self.samples[key])
            return values[int(q * (len(values) - 1))] / 1000  # ns -> us

        held = self.samples["held"]
        return {
            "p50_us": statistics.median(self.samples["route"]) / 1000,
            "p99_us": pct("route", 0.99),
            "cpu_p99_us": pct("route_cpu", 0.99),
            "finish_p50_us": statistics.median(self.samples["finish"]) / 1000,
            "finish_p99_us": pct("finish", 0.99),
            "finish_cpu_p99_us": pct("finish_cpu", 0.99),
            "request_p50_us": statistics.median(self.samples["whole"]) / 1000,
            "request_p99_us": pct("whole", 0.99),
            "busy_per_request_us": self.busy_ns / len(self.samples["route"]) / 1000,
            "progress_reports": statistics.mean(self.samples["reports"]),
            "held_min": min(held),
            "held_max": max(held),
        }


def measure_backlog(name: str, args: argparse.Namespace) -> dict[str, float]:
    """``Backlog``'s summary over ``args.requests`` arrivals."""
    load = Backlog(name, args)
    for _ in range(args.requests):
        load.one()
    return load.summary()


def floors(args: argparse.Namespace) -> dict[str, float]:
    """Median cost (us) of reading one prompt's tokens once, timed in the same run as the routers.

    ``pack``: ``array.tobytes``, what the index pays to read a prompt from SGLang;
    ``list``: ``list(prompt)``, one int object per token (what any index over
    Python ints pays first); ``hash``: ``hash`` of the packed prompt, the least
    a block-hash index pays; ``compare``: the one ``memcmp`` of the prompt
    against the stored edge of its shared prefix (``compare_tokens``: that
    edge's length), the least a token-exact lookup pays, timed on an index
    filled and kept turning over as in ``measure``, so the edge is as
    rarely in the CPU cache as when a router reads it.
    """
    source = PromptSource(args.seed + 1)
    out: dict[str, list[int]] = {"pack": [], "list": [], "hash": [], "compare": []}
    compared_tokens: list[int] = []
    for _ in range(200):
        prompt = source.next()[1]  # fresh, hence in cache, as when a router gets it
        t0 = time.perf_counter_ns()
        packed = prompt.tobytes()
        t1 = time.perf_counter_ns()
        list(prompt)
        t2 = time.perf_counter_ns()
        hash(packed)
        t3 = time.perf_counter_ns()
        out["pack"].append(t1 - t0)
        out["list"].append(t2 - t1)
        out["hash"].append(t3 - t2)
    index = RadixIndex(args.workers, args.capacity)
    source = PromptSource(args.seed)
    w = timed = 0
    samples = max(50, args.requests // 5)
    for _ in range(20 * samples):  # bounded: under a small cap, prefixes may be evicted before a second use
        if timed == samples:
            break
        prompt = source.next()[1]
        packed = prompt.tobytes()
        edge = index.root.children.get(packed[:PACKED_TOKEN_BYTES])  # the shared prefix, once seen
        if index.total_tokens >= args.prefill_tokens and edge is not None:
            t0 = time.perf_counter_ns()
            same = packed.startswith(edge.key)
            t1 = time.perf_counter_ns()
            if same:  # else the edge is a whole earlier prompt, not yet split at its prefix
                out["compare"].append(t1 - t0)
                compared_tokens.append(len(edge.key) // PACKED_TOKEN_BYTES)
                timed += 1
        index.insert(prompt, w)  # what routing it would store: the tail, evicting old ones past the cap
        w = (w + 1) % args.workers
    medians = {k: statistics.median(v) / 1000 if v else math.nan for k, v in out.items()}  # ns -> us
    medians["compare_tokens"] = statistics.median(compared_tokens) if compared_tokens else math.nan
    return medians


def index_memory(args: argparse.Namespace, index_cls: type = RadixIndex) -> tuple[int, float]:
    """(indexed tokens, bytes per indexed token) of an index filled with the benchmark's prompts.

    Counts what the index alone keeps alive: its nodes and packed edges.
    """
    source = PromptSource(args.seed)
    index = index_cls(args.workers, args.capacity)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    w = 0
    while index.total_tokens < args.prefill_tokens:
        tokens = source.next()[1]
        index.insert(tokens, w, after=index.match(tokens))
        w = (w + 1) % args.workers
    del tokens
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return index.total_tokens, used / index.total_tokens


def _print_backlog(name: str, b: dict[str, float]) -> None:
    print(f"{name} holding {b['held_min']}-{b['held_max']} requests: route p50 {b['p50_us']:.1f} us, "
          f"p99 {b['p99_us']:.1f} us wall / {b['cpu_p99_us']:.1f} us cpu; completion + admission "
          f"(places held requests) p50 {b['finish_p50_us']:.1f} us, p99 {b['finish_p99_us']:.1f} us wall / "
          f"{b['finish_cpu_p99_us']:.1f} us cpu; whole request (route, admission, {b['progress_reports']:.0f} "
          f"progress reports, completion) p50 {b['request_p50_us']:.1f} us, "
          f"p99 {b['request_p99_us']:.1f} us; the router's time per arrival {b['busy_per_request_us']:.1f} us")


def _load_index(path: str) -> type:
    import importlib.util

    spec = importlib.util.spec_from_file_location("baseline_radix_index", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--baseline-index: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module.RadixIndex


def _params(name: str) -> set[str]:
    return set(ROUTERS[name].option_defaults())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--requests", type=int, default=5000, help="timed route() calls per router")
    ap.add_argument("--prefill-tokens", type=int, default=1_000_000, help="index size before timing")
    ap.add_argument("--capacity", type=int, default=2_000_000, help="index LRU cap in tokens")
    ap.add_argument("--queue-depth", type=int, default=256, help="requests in flight before completions")
    ap.add_argument("--block", type=int, default=250,
                    help="requests per block when alternating a router with round-robin")
    ap.add_argument("--routers", default="round_robin,d2lpm,d2lpm_global,preble,cache_aware")
    ap.add_argument("--backlog", type=int, default=512,
                    help="requests held by late-binding routers in their extra run (0: skip it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress-every", type=int, default=PROGRESS_EVERY,
                    help="output tokens between a running request's progress reports (backlog run)")
    ap.add_argument("--target-default-p99-us", type=float, default=100.0,
                    help="d2lpm_global (the default router) route p99 target, wall, with nothing held")
    ap.add_argument("--target-completion-p99-us", type=float, default=300.0,
                    help="d2lpm_global completion + admission p99 target, wall, with the backlog held")
    ap.add_argument("--target-request-p50-us", type=float, default=150.0,
                    help="d2lpm_global whole cost of one request (route, admission, progress, completion) "
                         "p50 target, wall, with the backlog held")
    ap.add_argument("--target-p99-us", type=float, default=100.0, help="D²LPM wall p99 target")
    ap.add_argument("--target-ratio", type=float, default=4.0, help="D²LPM p50 / round-robin p50 target")
    ap.add_argument("--quick", action="store_true", help="small run for CI smoke tests")
    ap.add_argument("--memory", action="store_true", help="only measure index memory (tracemalloc)")
    ap.add_argument("--baseline-index", metavar="FILE",
                    help="also time d2lpm over the RadixIndex of FILE, fed list(input_ids) (row d2lpm@baseline)")
    args = ap.parse_args(argv)
    if args.memory:
        tokens, per_token = index_memory(args)
        print(f"index of {tokens} tokens (D={args.workers}): {per_token:.1f} bytes per token, "
              f"{per_token * 1e6 / 2**20:.1f} MiB per 1M indexed tokens")
        return 0
    if args.quick:
        args.requests, args.prefill_tokens, args.capacity, args.backlog, args.block = 300, 100_000, 200_000, 64, 100
    if args.block < 1 or args.requests < 1:
        ap.error("--block and --requests must be positive")
    names = [n.strip() for n in args.routers.split(",") if n.strip()]
    for n in names:
        if n not in ROUTERS:
            ap.error(f"unknown router {n!r}; choose from {', '.join(sorted(ROUTERS))}")
    print(
        f"D={args.workers} prompt={PROMPT_LEN} tokens, {args.requests} timed requests, "
        f"index prefilled to >= {args.prefill_tokens} tokens, cap {args.capacity}, python {sys.version.split()[0]}, "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus"
    )
    # Every router is timed in blocks alternating with round-robin's, and compared with
    # the round-robin blocks run between its own; the round-robin row pools them all.
    rr = Load("round_robin", args) if "round_robin" in names else None
    rows = [(n, n, None) for n in names if n != "round_robin"]
    if args.baseline_index:
        rows.append(("d2lpm@baseline", "d2lpm", _load_index(args.baseline_index)))
    results: dict[str, dict[str, float]] = {}
    paired_rr: dict[str, dict[str, float]] = {}
    rr_samples: list[tuple[int, int, int]] = []
    for row, name, index_cls in rows:
        results[row], theirs = measure(name, args, index_cls, rr)
        if rr is not None:
            paired_rr[row] = _summary(rr, theirs)
            rr_samples += theirs
    if rr is not None:
        if rows:
            print(f"each router timed in blocks of {args.block} requests alternating with round-robin's; "
                  f"'vs rr' divides by the round-robin blocks run between its own")
        else:  # round-robin alone
            gc.collect()
            rr_samples = [rr.step() for _ in range(args.requests)]
        results = {"round_robin": _summary(rr, rr_samples), **results}
        paired_rr["round_robin"] = results["round_robin"]
    base = results.get("round_robin")
    print(f"{'router':<16}{'p50 us':>9}{'p99 us':>9}{'cpu p50':>9}{'cpu p99':>9}{'max us':>10}{'req/s':>9}"
          f"{'finish us':>11}{'index tok':>11}{'vs rr p50':>11}{'cpu vs rr':>11}")
    for n, r in results.items():
        rr_n = paired_rr.get(n)
        ratio = f"{r['p50_us'] / rr_n['p50_us']:.1f}x" if rr_n else "-"
        cpu_ratio = f"{r['cpu_p50_us'] / rr_n['cpu_p50_us']:.1f}x" if rr_n else "-"
        print(
            f"{n:<16}{r['p50_us']:>9.1f}{r['p99_us']:>9.1f}{r['cpu_p50_us']:>9.1f}{r['cpu_p99_us']:>9.1f}{r['max_us']:>10.1f}"
            f"{r['route_per_s']:>9.0f}{r['finish_p50_us']:>11.2f}{r['index_tokens_end']:>11}{ratio:>11}{cpu_ratio:>11}"
        )
    backlogs: dict[str, dict[str, float]] = {}
    for n in names:
        if args.backlog > 0 and ROUTERS[n].holds_requests:
            b = backlogs[n] = measure_backlog(n, args)
            _print_backlog(n, b)
    if base is not None:
        f = floors(args)
        print(f"reading one {PROMPT_LEN}-token prompt: pack {f['pack']:.1f} us ({f['pack'] / base['p50_us']:.1f}x rr p50), "
              f"list() {f['list']:.1f} us ({f['list'] / base['p50_us']:.1f}x), "
              f"hash {f['hash']:.1f} us ({f['hash'] / base['p50_us']:.1f}x); "
              f"comparing it with its cached prefix ({f['compare_tokens']:.0f} tokens, one memcmp) "
              f"{f['compare']:.1f} us ({f['compare'] / base['p50_us']:.1f}x)")
    d2, verdict = results.get("d2lpm"), 0
    if d2 is not None and d2["index_tokens_end"] < args.prefill_tokens:
        print(f"note: the index ended below {args.prefill_tokens} tokens ({d2['index_tokens_end']})")
    if d2 is not None and base is not None:
        rr_d2 = paired_rr["d2lpm"]
        ratio = d2["p50_us"] / rr_d2["p50_us"]
        ok_ratio = ratio <= args.target_ratio
        print(f"d2lpm p50 {d2['p50_us']:.1f} us = {ratio:.1f}x round-robin's {rr_d2['p50_us']:.1f} us in the blocks "
              f"between (cpu {d2['cpu_p50_us'] / rr_d2['cpu_p50_us']:.1f}x) vs target {args.target_ratio:g}x: "
              f"{'PASS' if ok_ratio else 'FAIL'}")
        verdict |= not ok_ratio
    if d2 is not None:
        ok_p99 = d2["p99_us"] <= args.target_p99_us
        print(f"d2lpm p99 {d2['p99_us']:.1f} us (wall) / {d2['cpu_p99_us']:.1f} us (cpu) vs target "
              f"{args.target_p99_us:g} us: {'PASS' if ok_p99 else 'FAIL'} (wall)")
        verdict |= not ok_p99
    default = results.get("d2lpm_global")
    if default is not None:
        ok = default["p99_us"] <= args.target_default_p99_us
        print(f"d2lpm_global (default) route p99 {default['p99_us']:.1f} us (wall) vs target "
              f"{args.target_default_p99_us:g} us: {'PASS' if ok else 'FAIL'}")
        verdict |= not ok
    held = backlogs.get("d2lpm_global")
    if held is not None:
        ok = held["finish_p99_us"] <= args.target_completion_p99_us
        print(f"d2lpm_global completion + admission p99 {held['finish_p99_us']:.1f} us (wall) vs target "
              f"{args.target_completion_p99_us:g} us: {'PASS' if ok else 'FAIL'}")
        verdict |= not ok
        ok = held["request_p50_us"] <= args.target_request_p50_us
        rate = 1e6 / held["request_p50_us"] if held["request_p50_us"] else math.inf
        print(f"d2lpm_global whole cost per request p50 {held['request_p50_us']:.1f} us (one core routes "
              f"{rate:,.0f} requests/s) vs target {args.target_request_p50_us:g} us: {'PASS' if ok else 'FAIL'}")
        verdict |= not ok
    return int(verdict)


if __name__ == "__main__":
    raise SystemExit(main())
