"""DLPM paper, the time-series figures: Fig. 8 (multi-turn chat, D = 2, two flooding clients),
Fig. 9 (Tree-of-Thoughts, D = 4, one client with 10x longer questions), Fig. 12 (one GPU, two
chat clients and two program clients).

The paper ran Llama-3.2-3B on A10G GPUs; here every worker is a simulated H100 serving
Llama-3.1-8B (profile h100-llama-3.1-8b, the KV pool SGLang gives it), with arrival rates
raised until the H100s are overloaded the way the paper's A10Gs were. Chat conversations are
synthetic with Chatbot Arena's length statistics (the paper replays real conversations).
"""

from __future__ import annotations

from dataclasses import replace

from sglang_fair.bench.paper.claims import Check, ClaimRow, make_row
from sglang_fair.bench.paper.common import (
    backlogged,
    end_to_end,
    merge,
    percentile,
    plot_traces,
    ratio,
    response_times,
    scenario,
    simulate,
)
from sglang_fair.bench.paper.figure import Figure, FigureRun
from sglang_fair.bench.paper_grid import LOAD, PAPER_SCALE
from sglang_fair.workloads.model import Workload

PAPER = "dlpm"
CHAT = {"source": "synthetic", "user_tokens": 56, "reply_tokens": 142, "max_turns": 6, "mean_turns": 3.0,
        "max_output_tokens": 512, "max_context_tokens": 4096}
H100 = "simulated H100 x{d}, Llama-3.1-8B (paper: Llama-3.2-3B on {gpu})"


def _chat(names_rates: list[tuple[str, float, bool]], duration: float, seed: int, tag: str) -> Workload:
    clients = [{"name": n, "rate": r, "num_programs": max(1, round(r * duration)), "well_behaved": ok}
               for n, r, ok in names_rates]
    return scenario({"workload": "chat", "name": tag, "seed": seed, "vocab_size": 32000,
                     "defaults": {"arrival": "poisson", **CHAT}, "clients": clients}, seed)


def chat_flood(quick: bool, seed: int) -> tuple[Workload, float]:
    """Fig. 8's arrivals: c0, c1 at the normal rate; c2, c3 at ``FLOOD`` x it, c2 back to normal
    half-way. Conversations per second; a conversation's turns follow each other."""
    normal, flood, t = (0.5, 20.0, 20.0) if quick else (1.0, 40.0, 120.0)
    first = _chat([("c0", normal, True), ("c1", normal, True), ("c2", flood, False), ("c3", flood, False)],
                  t / 2, seed, "chat-flood")
    second = _chat([("c0", normal, True), ("c1", normal, True), ("c2", normal, True), ("c3", flood, False)],
                   t / 2, seed + 1, "chat-flood")
    wl = merge("chat-flood-D2", first, second, shifts=(0.0, t / 2))
    # c2 is judged as a flooder for the whole run (it was one for half of it).
    wl.programs = [p if p.client != "c2" else replace(p, well_behaved=False) for p in wl.programs]
    return wl, t


def _trace_checks(runs: dict[str, dict], fair: str, good: list[str], bad: list[str]) -> tuple[list[Check], str]:
    """The checks of Figs. 8 and 12, and the measurements behind them: each system's numbers the
    ratios divide, and how long the well-behaved clients waited for admission (a baseline that
    never makes them wait cannot be beaten by 2x on their latency)."""
    p99 = {n: percentile(response_times(r["records"], good), 99) for n, r in runs.items()}
    worst = {n: max(response_times(r["records"], bad), default=None) for n, r in runs.items()}
    waiting = {n: backlogged(r["records"], good) for n, r in runs.items()}
    checks = [Check(f"precondition: flooders {', '.join(bad)} backlogged under VTC (share of the run)",
                    backlogged(runs["vtc"]["records"], bad), ">=", 0.25, pre=True),
              Check(f"well-behaved P99 response, {fair} / LPM", ratio(p99[fair], p99["lpm"]), "<=", 0.5),
              Check(f"flooders' worst response, {fair} / VTC", ratio(worst[fair], worst["vtc"]), "<=", 0.5)]
    return checks, "; ".join([_per_system("well-behaved P99 response (s)", p99),
                              _per_system("flooders' worst response (s)", worst),
                              _per_system("well-behaved clients waiting for admission (share of the run)", waiting,
                                          "{:.3f}")])


def _per_system(what: str, values: dict[str, float | None], fmt: str = "{:.1f}") -> str:
    return f"{what}: " + ", ".join(f"{n} {fmt.format(v)}" for n, v in values.items() if v is not None)


def busiest_worker_share(records, client: str) -> float | None:
    """The largest share of one worker's served requests that came from ``client``
    (near 1: that worker was given over to it, as the paper saw Preble do)."""
    per_worker: dict[int, list[bool]] = {}
    for r in records:
        if r.ok and r.worker is not None:
            per_worker.setdefault(r.worker, []).append(r.client == client)
    shares = [sum(xs) / len(xs) for xs in per_worker.values() if xs]
    return max(shares) if shares else None


def fig8(ctx: FigureRun) -> ClaimRow:
    wl, t = chat_flood(ctx.quick, ctx.opts.seed)
    runs = {"lpm": simulate(ctx, wl, "rr+lpm", 2), "vtc": simulate(ctx, wl, "vtc", 2),
            "d2lpm": simulate(ctx, wl, "d2lpm", 2)}
    plot_traces(runs, ctx.dir / "fig8.png", "DLPM Fig. 8: multi-turn chat, D=2; c2, c3 flood (c2 until half-way)",
                window=t / 20)
    checks, measured = _trace_checks(runs, "d2lpm", ["c0", "c1"], ["c2", "c3"])
    return make_row(PAPER, "8", "LPM starves clients 0/1, VTC delays flooders 2/3, D2LPM keeps all low", checks,
                    H100.format(d=2, gpu="A10G") + "; synthetic chat lengths", ctx.dir, ctx.quick, note=measured)


def tot_long_prefix(quick: bool, seed: int, workers: int) -> Workload:
    """Fig. 9's arrivals: ToT, branches 3, client c0 with 10x longer questions (tot S2's 'bad')."""
    t, scale = (4.0, 1.0) if quick else (30.0, 1.0)
    base = PAPER_SCALE["tot"] | {"branches": 3, "height": 4}
    # 120 calls a tree (branches 3) instead of tot S2's 30: a quarter of its rate offers the same work.
    rate = 0.1 * LOAD[("tot", "s2")] * workers * scale / 4
    clients = [{"name": "c0", "question_scale": 10, "well_behaved": False}, {"name": "c1"}, {"name": "c2"}]
    for c in clients:
        c |= {"rate": rate, "num_programs": max(1, round(rate * t))}
    return scenario({"workload": "tot", "name": f"tot-long-prefix-D{workers}", "seed": seed, "vocab_size": 32000,
                     "defaults": {"arrival": "gamma", "cv": 2.0, **base}, "clients": clients}, seed)


def fig9(ctx: FigureRun) -> ClaimRow:
    d = 4
    wl = tot_long_prefix(ctx.quick, ctx.opts.seed, d)
    runs = {name: simulate(ctx, wl, name, d) for name in ("d2lpm", "vtc", "preble")}
    e2e = {n: end_to_end(r["records"]) for n, r in runs.items()}
    plot_traces(runs, ctx.dir / "fig9.png", "DLPM Fig. 9: ToT, D=4, c0 with 10x longer questions",
                window=(max(v for v in e2e.values() if v) or 1.0) / 20)
    checks = [Check("end-to-end time, D2LPM / VTC", ratio(e2e["d2lpm"], e2e["vtc"]), "<=", 0.7),
              Check("end-to-end time, D2LPM / Preble", ratio(e2e["d2lpm"], e2e["preble"]), "<=", 0.7)]
    c0 = {n: busiest_worker_share(r["records"], "c0") for n, r in runs.items()}
    hits = {n: r["hit_rate"] for n, r in runs.items()}
    return make_row(PAPER, "9", "D2LPM finishes all programs first: up to 2x faster than VTC and Preble", checks,
                    H100.format(d=d, gpu="4 A10G"), ctx.dir, ctx.quick,
                    note="; ".join([_per_system("end-to-end (s)", e2e),
                                    _per_system("c0's share of its busiest worker's requests", c0, "{:.2f}"),
                                    _per_system("cache hit rate", hits, "{:.3f}")]))


def mixed(quick: bool, seed: int) -> tuple[Workload, float]:
    """Fig. 12's arrivals on one GPU: c0, c1 chat; c2 ToT, c3 LLM-as-a-judge (paper lengths)."""
    # Full scale: 4x the quick rates, which one H100 serves without a queue (measured: no backlog).
    t, scale = (20.0, 1.0) if quick else (60.0, 4.0)
    chat = _chat([("c0", 1.0 * scale, True), ("c1", 1.0 * scale, True)], t, seed, "mix")
    tot = scenario({"workload": "tot", "name": "mix", "seed": seed, "vocab_size": 32000,
                    "defaults": {"arrival": "gamma", "cv": 2.0, **PAPER_SCALE["tot"]},
                    "clients": [{"name": "c2", "rate": 0.4 * scale, "num_programs": max(1, round(0.4 * scale * t)),
                                 "well_behaved": False}]}, seed)
    judge = scenario({"workload": "judge", "name": "mix", "seed": seed, "vocab_size": 32000,
                      "defaults": {"arrival": "gamma", "cv": 2.0, "dimensions": 8, **PAPER_SCALE["judge"]},
                      "clients": [{"name": "c3", "rate": 0.5 * scale, "num_programs": max(1, round(0.5 * scale * t)),
                                   "well_behaved": False}]}, seed)
    return merge("mix-D1", chat, tot, judge), t


def fig12(ctx: FigureRun) -> ClaimRow:
    wl, t = mixed(ctx.quick, ctx.opts.seed)
    runs = {name: simulate(ctx, wl, name, 1) for name in ("lpm", "vtc", "dlpm")}
    plot_traces(runs, ctx.dir / "fig12.png", "DLPM Fig. 12: one GPU, chat c0/c1, ToT c2, judge c3", window=t / 20)
    e2e = {n: end_to_end(r["records"]) for n, r in runs.items()}
    checks, measured = _trace_checks(runs, "dlpm", ["c0", "c1"], ["c2", "c3"])
    return make_row(PAPER, "12", "DLPM keeps chat clients' response low next to program clients (LPM does not)",
                    checks, H100.format(d=1, gpu="A10G"), ctx.dir, ctx.quick,
                    note=_per_system("end-to-end (s)", e2e) + "; " + measured)


FIGURES = [Figure("8", "multi-turn chat, D=2, two flooding clients", fig8),
           Figure("9", "ToT, D=4, one client with 10x longer questions", fig9),
           Figure("12", "one GPU, chat and program clients", fig12)]
