"""The simulator at the DLPM paper's scale: its workloads, an H100's KV pool, one simulated run.

Shared by the paper's evaluation grid (``benchmarks/experiments/sim_trends.py``) and the
experiments built on its cells (``benchmarks/experiments/sim_variants.py``,
``benchmarks/experiments/latency_isolation_sim.py``):

* ``paper_workload``: a scenario of ``configs/`` at the paper's lengths
  (Table 2), every client's Gamma arrival rate x ``LOAD`` x the number of
  workers, for ``DURATION_S`` seconds (§6.1, "Synthetic Traces");
* ``h100_kv_pool_tokens``: the KV pool SGLang 0.5.23 gives one H100 serving
  Llama-3.1-8B (``SIM`` holds it, and the run options a command line sets);
* ``run_one``: one system simulated on a workload, as a row of metrics,
  written and audited as a run directory when asked.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path

from sglang_fair.bench.audit import audit_fields
from sglang_fair.bench.output import write_run
from sglang_fair.metrics.backlog import backlog_spans
from sglang_fair.metrics.service import ServiceWeights, by_client
from sglang_fair.metrics.summary import summarize
from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Workload
from sglang_fair.workloads.registry import build_workload
from sglang_fair.workloads.spec import load_scenario, scenario_path

# Paper-scale lengths (DLPM paper Table 2); the configs are scaled for the tiny CPU model.
PAPER_SCALE = {
    "tot": {"template_tokens": 400, "question_tokens": 70, "step_tokens": 16, "thought_tokens": 256},
    "qa": {"doc_tokens": 21449, "question_tokens": 24, "answer_tokens": 15},
    "judge": {"article_tokens": 2701, "criterion_tokens": 32, "verdict_tokens": 256, "merge_tokens": 48,
              "verdict_summary_tokens": 64, "merge_output_tokens": 256},
}

# Arrival rate at D = 1, as a multiple of each client's rate in configs/<workload>_<scenario>.yaml
# (the misbehaving QA S1 client keeps its 4x rate). Chosen so that one simulated H100 is offered
# about twice the service it delivers with LPM: measured with 60 s of arrivals, LPM saturates at
# about 67k (ToT S1), 72k (ToT S2), 98k (QA S1), 92k (QA S2), 44k (judge S1) and 30k (judge S2)
# service/s per worker. At D workers every rate is D x this.
LOAD = {
    ("tot", "s1"): 1.0,
    ("tot", "s2"): 7.0,
    ("qa", "s1"): 1.1,
    ("qa", "s2"): 1.4,
    ("judge", "s1"): 5.0,
    ("judge", "s2"): 7.0,
}
DURATION_S = 30.0  # seconds of arrivals (the same for every system and cell; 60 s takes over 45 min)

# name -> (local policy, router, router options); D = 1 uses the policy alone (one row per policy).
SYSTEMS = {
    "fcfs": ("fcfs", "round_robin", {}),  # D = 1 only (at D > 1 it repeats rr+lpm, at a run's cost)
    "rr+lpm": ("lpm", "round_robin", {}),
    "vtc": ("vtc", "per_client_round_robin", {}),  # the paper's distributed VTC
    "preble": ("lpm", "preble", {}),
    # Algorithm 2 as published; Q^w 10,000 is the router's default, the middle of the paper's
    # Fig. 10 sweep (the paper does not state the Q^w of Fig. 7).
    "d2lpm-paper": ("dlpm", "d2lpm", {"quantum": 10_000}),
    "d2lpm": ("dlpm", "d2lpm_global", {}),  # the default router of --policy dlpm --dp N
}
DEFAULT, PEER, BASELINE, PAPER = "d2lpm", "preble", "vtc", "d2lpm-paper"

# KV pool per worker: an H100 80GB serving Llama-3.1-8B in bf16 under SGLang 0.5.23's defaults
# (sglang/srt/arg_groups/memory_hook.py, handle_gpu_memory_settings, for a GPU of 60-90 GB):
# mem_fraction_static = round((GPU - reserved) / GPU, 3), reserved = 512 MiB + 1.5 MiB per
# chunked-prefill token (8,192) + tp/8 x 1,024 MiB + CUDA-graph buffers (2 MiB per decode batch
# size up to 256, 8 MiB per prefill capture size: 58 sizes up to 8,192 tokens), at least 10 GiB;
# the KV pool is what the static fraction leaves after the weights.
H100_MEMORY_MIB = 81_559  # nvidia-smi memory.total of an H100 80GB HBM3 (the calibration GPU)
SGLANG_CHUNKED_PREFILL = 8192
SGLANG_DECODE_GRAPH_MAX_BS = 256
SGLANG_PREFILL_GRAPH_SIZES = 58  # len(generate_prefill_cuda_graph_batch_sizes(8192))
LLAMA_8B_WEIGHT_BYTES = 8_030_261_248 * 2  # parameters x bf16
LLAMA_8B_KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16
SMALL_POOL_TOKENS = 60_000
SMALL_POOL_CELLS = (("tot", "s2", 4), ("qa", "s1", 8))


def sglang_reserved_mib(tp: int = 1) -> float:
    reserved = (512 + 1.5 * SGLANG_CHUNKED_PREFILL + tp / 8 * 1024
                + 2 * SGLANG_DECODE_GRAPH_MAX_BS + 8 * SGLANG_PREFILL_GRAPH_SIZES)
    return max(reserved, 10 * 1024)


def mem_fraction_static(gpu_mib: float = H100_MEMORY_MIB) -> float:
    return round((gpu_mib - sglang_reserved_mib()) / gpu_mib, 3)


def h100_kv_pool_tokens() -> int:
    """KV pool per worker: mem_fraction_static x GPU memory - weights, in KV tokens."""
    static = mem_fraction_static() * H100_MEMORY_MIB * 2**20
    return int((static - LLAMA_8B_WEIGHT_BYTES) // LLAMA_8B_KV_BYTES_PER_TOKEN)


SIM = {"kv_pool_tokens": h100_kv_pool_tokens(), "lpm_queue_limit": 128}  # set from the command line


def paper_workload(workload: str, scenario: str, workers: int, seed: int, duration: float = DURATION_S,
                   load: float | None = None) -> Workload:
    """The scenario with every client's Gamma rate x LOAD x ``workers`` for ``duration`` seconds."""
    sc = load_scenario(scenario_path(workload, scenario), PAPER_SCALE[workload], seed)
    scale = (LOAD[(workload, scenario)] if load is None else load) * workers
    sc.clients = [replace(c, rate=c.rate * scale, num_programs=max(1, round(c.rate * scale * duration)))
                  for c in sc.clients]
    wl = build_workload(sc)
    wl.name = f"{workload}-{scenario}-D{workers}"
    return wl


def client_rates(workload: str, scenario: str, seed: int = 0) -> dict[str, float]:
    """Programs per second of each distinct client rate at D = 1 (client name -> rate)."""
    sc = load_scenario(scenario_path(workload, scenario), PAPER_SCALE[workload], seed)
    return {c.name: c.rate * LOAD[(workload, scenario)] for c in sc.clients}


def prompt_lengths(calls) -> list[int]:
    """Prompt length of each call of a program as the replay builds it: an ``extends_parent``
    call's prompt is its first parent's prompt and output (max_new_tokens; outputs ignore EOS)
    followed by its own tokens."""
    out: list[int] = []
    for c in calls:  # parents come before their children
        n = len(c.tokens)
        if c.extends_parent and c.parents:
            p = c.parents[0]
            n += out[p] + calls[p].max_new_tokens
        out.append(n)
    return out


def offered_service(wl: Workload, w_input: float = 1.0, w_output: float = 2.0) -> float:
    """Service of every call of the workload (whole prompt + output, the throughput's measure)."""
    return sum(w_input * n + w_output * c.max_new_tokens
               for p in wl.programs for n, c in zip(prompt_lengths(p.calls), p.calls))


def arrival_span(wl: Workload) -> float:
    return max((p.arrival for p in wl.programs), default=0.0)


def waiting_share(records, interval: tuple[float, float] | None, clients: list[str]) -> float | None:
    """Mean over ``clients`` of the fraction of ``interval`` they had a request waiting for admission."""
    if not interval or interval[1] <= interval[0] or not clients:
        return None
    groups = by_client(records)
    a, b = interval
    shares = []
    for c in clients:
        spans = backlog_spans(groups.get(c, []))
        shares.append(sum(max(0.0, min(e, b) - max(s, a)) for s, e in spans) / (b - a))
    return sum(shares) / len(shares)


def run_one(wl: Workload, policy: str, router: str, workers: int, seed: int, fair: dict | None = None,
            router_options: dict | None = None, run_dir: Path | None = None, keep_records: bool = False,
            **sim: object) -> dict:
    """Simulate one system on ``wl``; with ``run_dir``, write the run there and audit it; with
    ``keep_records``, the row also holds the run's request records (``records``)."""
    backend = SimBackend(policy=policy, seed=seed, num_workers=workers, router=router if workers > 1 else "round_robin",
                         fair=fair, router_options=(router_options or {}) if workers > 1 else {}, **(SIM | sim))
    result = backend.run(wl, progress=False)
    flags = wl.well_behaved_clients()
    run_info = {"workload": wl.meta.get("workload"), "scenario": wl.meta.get("source"), "scenario_name": wl.name,
                "policy": policy, "backend": "sim", "seed": seed,
                "command": " ".join(shlex.quote(a) for a in sys.argv)}
    if run_dir is None:
        run = {**run_info, "partial": result.partial, "errors": list(result.errors), "backend_meta": result.meta,
               "params": result.params}
        summary = summarize(result.records, well_behaved=flags, run=run)
    else:
        summary = write_run(run_dir, result, run_info, flags, ServiceWeights(), plots=False)
    s = summary["overall"]
    wb = s["well_behaved_program_latency_s"]
    interval = tuple(s["jain_interval_s"]) if s["jain_interval_s"] else None
    row = {
        "throughput": s["throughput"]["service_per_s"],
        "jain": s["jain_index"],
        "wb_p50": wb["p50"],
        "wb_p99": wb["p99"],
        "hit_rate": s["cache_hit_rate"],
        "wb_waiting": waiting_share(result.records, interval, [c for c, ok in flags.items() if ok]),
        "requests": s["requests"],
        "ok": s["requests_ok"],
        "kv_pool_tokens": (SIM | sim).get("kv_pool_tokens"),
        "sim_time_s": result.meta["sim_time_s"],
        "extrapolated": result.meta["extrapolated"],
        "wall_s": result.meta["wall_s"],
    }
    if run_dir is not None:
        row["run_dir"] = str(run_dir)
        row |= audit_fields(run_dir)
    if keep_records:
        row["records"] = result.records
    return row
