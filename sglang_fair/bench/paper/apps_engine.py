"""FairServe's and Justitia's headline comparisons replayed on the real SGLang server (tiny CPU
model): figures ``abuse-engine`` of ``bench paper fairserve``, ``mix-engine`` and
``starvation-engine`` of ``bench paper justitia``, beside the simulator's ``abuse``, ``mix`` and
``starvation`` (paper/apps.py), with the same scenarios (configs/apps_*.yaml), policy settings
(configs/policy_paper_scenarios.yaml) and checks.

Per system, one tiny CPU server (``sglang_fair.launch_server --policy SYSTEM``, 8,192-token KV
pool) is started, the scenario's programs arriving in its first seconds are replayed over HTTP as
``bench run`` does (token ids fitted to the model's vocabulary the same way), and the server is
stopped before the next one starts, so no two share the machine's cores. Calls that do not fit the
model's 2,048-token context (prompt and output; the server refuses them with HTTP 400) are
dropped before the replay, with the calls that depend on them, and counted, so every system gets
the same workload. One more check: every call ended as exactly one record (an answer, a refusal
or an explicit error) on every system.

How many seconds of arrivals (``ENGINE_SECONDS``), so that each scenario overloads the tiny
server and the three figures take about 8 minutes (a server takes about 25 s to start):

* fairserve_abuse, 3 s: 68 programs (149 calls, 132 of them the abuser's, far more than
  FairServe's 20 a user per 20 s);
* justitia_mix, 1 s: 11 applications (31 calls; each user's first application arrives at once);
* justitia_starvation, 1 s: the elephant and 25 mice (105 calls); the elephant (30 map calls of
  200 tokens over a 1,500-token prompt, a few at a time in the 8,192-token pool) is the same
  work whatever the seconds: about a minute of replay per system.

Quick mode replays the first 10 ms of arrivals (a handful of programs).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from collections.abc import Callable
from importlib import metadata

from sglang_fair.bench.backends import make_backend
from sglang_fair.bench.model_vocab import fit_to_model, read_model_vocab
from sglang_fair.bench.output import write_run
from sglang_fair.bench.paper.apps import (POLICY_CONFIG, completion_times, fairserve_checks, justitia_checks,
                                          plot_cdf_panel)
from sglang_fair.bench.paper.claims import Check, ClaimRow, make_row
from sglang_fair.bench.paper.common import percentile
from sglang_fair.bench.paper.figure import Figure, FigureRun
from sglang_fair.bench.paper_grid import prompt_lengths
from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.runs.records import RequestRecord
from sglang_fair.testing.server import LocalServer
from sglang_fair.tiny_cpu import TinyLlamaSpec
from sglang_fair.workloads.model import Call, Workload
from sglang_fair.workloads.registry import make_workload

CONTEXT_TOKENS = TinyLlamaSpec().max_position_embeddings
ENGINE_SECONDS = {"fairserve_abuse": 3.0, "justitia_mix": 1.0, "justitia_starvation": 1.0}  # why: the docstring
QUICK_SECONDS = 0.01
SETUP = ("real SGLang {sglang} server on CPU, tiny random-weight Llama ({context:,}-token context), "
         "KV pool {pool:,}; arrivals of the first {seconds:g} s")
ANSWERED_ONCE = "calls answered or refused exactly once (worst system's share)"


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


def answered_once(wl: Workload, records: list[RequestRecord]) -> float:
    """Share of the calls of ``wl`` that ended as exactly one record (1.0: none lost, none doubled)."""
    expected = {f"{p.program_id}-{i}" for p in wl.programs for i in range(len(p.calls))}
    seen = collections.Counter(r.rid for r in records)
    once = sum(seen[rid] == 1 for rid in expected)
    return once / len(expected) if expected and not set(seen) - expected else 0.0


def system_row(records: list[RequestRecord]) -> dict:
    """What one system did with the calls: answered, refused, failed, never sent, completion times."""
    times = list(completion_times(records).values())
    unsent = sum(not r.ok and not r.throttled and (r.error or "").startswith("parent failed") for r in records)
    return {"requests": len(records), "ok": sum(r.ok for r in records),
            "throttled": sum(r.throttled for r in records), "not_sent": unsent,
            "errors": sum(not r.ok and not r.throttled for r in records) - unsent,
            "programs_completed": len(times), "mean_completion_s": sum(times) / len(times) if times else None,
            "p90_completion_s": percentile(times, 90)}


class _Replay:
    """The scenario's workload, prepared on the first server (vocabulary fitted, calls over the
    context dropped) and replayed unchanged on every other."""

    def __init__(self, ctx: FigureRun, scenario: str, seconds: float) -> None:
        self.ctx, self.scenario, self.seconds = ctx, scenario, seconds
        self.workload: Workload | None = None
        self.info: dict = {}

    def _prepare(self, url: str) -> Workload:
        name, seed, seconds = self.scenario, self.ctx.opts.seed, self.seconds
        wl, notice = fit_to_model(scenario_workload(name, seed, seconds), read_model_vocab(url), chosen=None,
                                  regenerate=lambda size: scenario_workload(name, seed, seconds, size))
        if notice:
            self.ctx.log(notice)
        calls = wl.num_calls()
        wl, dropped_calls, dropped_programs = drop_unfit(wl)
        self.ctx.log(f"{len(wl.programs)} programs, {wl.num_calls()} calls arriving in {seconds:g} s; dropped "
                     f"{dropped_calls} of {calls} calls ({dropped_programs} whole programs) over the model's "
                     f"{CONTEXT_TOKENS}-token context")
        self.info = {"seconds": seconds, "programs": len(wl.programs), "calls": wl.num_calls(),
                     "dropped_calls": dropped_calls, "dropped_programs": dropped_programs,
                     "vocab_size": wl.meta.get("vocab_size")}
        return wl

    def run(self, system: str) -> tuple[list[RequestRecord], list[str]]:
        """``system``'s records, written as ``<figure dir>/<system>/``, and its run-level errors."""
        log = self.ctx.dir / f"{system}-server.log"
        self.ctx.log(f"{system}: starting the tiny CPU server (log: {log})")
        args = ["--policy", system, "--fair-policy-config", POLICY_CONFIG]
        with LocalServer(module="sglang_fair.launch_server", extra_args=args, log_path=log) as server:
            if self.workload is None:
                self.workload = self._prepare(server.base_url)
            started = time.monotonic()
            result = make_backend(server.base_url, policy=system).run(self.workload, progress=False)
            errors = list(result.errors)
            if server.poll() is not None:
                errors.append(f"the server exited with code {server.poll()} during the run; log: {log}")
        self.ctx.log(f"{system}: replayed in {time.monotonic() - started:.1f} s")
        wl = self.workload
        flags = wl.well_behaved_clients()
        run_info = {"workload": wl.meta.get("workload"), "scenario": wl.meta.get("source"),
                    "scenario_name": wl.name, "policy": system, "backend": "http", "seed": self.ctx.opts.seed}
        write_run(self.ctx.dir / system, result, run_info, flags, ServiceWeights(), plots=False)
        return result.records, errors


def _plot(ctx: FigureRun, records: dict[str, list[RequestRecord]], title: str, clients: set[str] | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    plot_cdf_panel(ax, records, title + " (real engine, tiny CPU model)", clients)
    fig.tight_layout()
    fig.savefig(ctx.dir / f"fig{ctx.figure}.png", dpi=110)
    plt.close(fig)


Checks = Callable[[dict[str, list[RequestRecord]], Workload], tuple[list[Check], str]]


def engine_figure(paper: str, scenario: str, number: str, systems: tuple[str, ...], claim: str, checks: Checks,
                  plot_benign_only: bool = False) -> Figure:
    """A figure that replays ``scenario`` on a real server per system and checks ``checks``."""

    def run(ctx: FigureRun) -> ClaimRow:
        replay = _Replay(ctx, scenario, QUICK_SECONDS if ctx.quick else ENGINE_SECONDS[scenario])
        records, problems = {}, {}
        for system in systems:
            records[system], problems[system] = replay.run(system)
        wl = replay.workload
        assert wl is not None
        once = {s: answered_once(wl, r) if not problems[s] else 0.0 for s, r in records.items()}
        found, note = checks(records, wl)
        found.append(Check(ANSWERED_ONCE, min(once.values()), ">=", 1.0))
        benign = {p.client for p in wl.programs if p.well_behaved} if plot_benign_only else None
        _plot(ctx, records, f"{paper}: {scenario}" + (", benign users" if benign else ""), benign)
        summary = replay.info | {"systems": {s: system_row(r) | {"answered_once_share": once[s],
                                                                  "run_errors": problems[s]}
                                             for s, r in records.items()}}
        (ctx.dir / "engine.json").write_text(json.dumps(summary, indent=2) + "\n")
        lost = [f"{s}: {'; '.join(p)}" for s, p in problems.items() if p]
        setup = SETUP.format(sglang=metadata.version("sglang"), context=CONTEXT_TOKENS,
                             pool=LocalServer.max_total_tokens, seconds=replay.seconds)
        return make_row(paper, number, claim, found, setup, ctx.dir, ctx.quick,
                        note="; ".join(x for x in [note, *lost] if x))

    return Figure(number, f"apps_{scenario}, replayed on the real engine", run)


def _fairserve(records: dict[str, list[RequestRecord]], wl: Workload) -> tuple[list[Check], str]:
    found = fairserve_checks(records, {p.client for p in wl.programs if p.well_behaved})
    refused = {s: sum(r.throttled for r in recs) for s, recs in records.items()}
    return found, "refused (HTTP 429): " + ", ".join(f"{s} {n} of {len(records[s])}" for s, n in refused.items())


def _justitia(scenario: str) -> Checks:
    def checks(records: dict[str, list[RequestRecord]], wl: Workload) -> tuple[list[Check], str]:
        found, mean = justitia_checks(scenario, records)
        return found, "mean completion (s): " + ", ".join(f"{n} {v:.2f}" for n, v in mean.items() if v is not None)

    return checks


FAIRSERVE = [engine_figure("fairserve", "fairserve_abuse", "abuse-engine", ("fairserve", "vtc"),
                           "overload throttling refuses the abusive application, not benign users, "
                           "and keeps benign interactions fast", _fairserve, plot_benign_only=True)]
JUSTITIA = [engine_figure("justitia", s, n, ("justitia", "vtc", "fcfs"),
                          "Justitia completes applications sooner on average than VTC and FCFS"
                          + (", without starving the elephant" if n == "starvation-engine" else ""), _justitia(s))
            for s, n in (("justitia_mix", "mix-engine"), ("justitia_starvation", "starvation-engine"))]
